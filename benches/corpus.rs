//! Deterministic MCP traffic for the benches (and for tests that include this file with
//! `#[path = "../benches/corpus.rs"] mod corpus;`).
//!
//! Each generator returns a newline-delimited stream of valid JSON-RPC 2.0 messages, built from
//! a fixed-seed PRNG so every run sees exactly the same bytes. No external crates.
//!
//! - [`mixed`]: realistic tool traffic, about 1.2 KB per message on average: small requests,
//!   progress notifications, pings, text results with escapes and non-ASCII text, and rare
//!   large `tools/list` and base64 `resources/read` results.
//! - [`small`]: chatty control traffic, about 155 B per message on average.
//! - [`tools`]: `tools/list` results only (20 to 50 KB each), the structure-heavy case.
//!
//! Every message is written with its members in the order mcpwire's encoder uses
//! (`jsonrpc`, `id`, `method`, `params` / `result` / `error`; `code`, `message`, `data`), so
//! re-encoding a decoded message reproduces its line byte for byte.

/// A generated stream: one message per line, each line ending in `\n`.
#[allow(dead_code)]
pub struct Corpus {
    /// The stream.
    pub bytes: Vec<u8>,
    /// How many messages (lines) it holds.
    pub messages: usize,
}

#[allow(dead_code)]
impl Corpus {
    /// The messages, without their newlines.
    pub fn lines(&self) -> impl Iterator<Item = &[u8]> {
        self.bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty())
    }

    /// Average message size in bytes, counting the newline.
    pub fn average(&self) -> f64 {
        self.bytes.len() as f64 / self.messages as f64
    }
}

/// Mixed tool traffic: about 1.2 KB per message, about 6 MB in all.
#[allow(dead_code)]
pub fn mixed() -> Corpus {
    const MESSAGES: usize = 5_000;
    let mut g = Gen::new(0x6d63_7077_6972_6531);
    let mut out = Vec::with_capacity(MESSAGES * 1300);
    for n in 0..MESSAGES {
        let id = g.id(n);
        // The big ones come on a fixed schedule so the average does not hinge on luck.
        if n % 250 == 125 {
            g.tools_list_result(&mut out, id);
        } else if n % 1000 == 617 {
            g.resource_blob_result(&mut out, id);
        } else {
            match g.below(100) {
                0..=24 => g.tools_call_request(&mut out, id),
                25..=40 => g.progress_notification(&mut out),
                41..=47 => g.ping_request(&mut out, id),
                48..=54 => g.empty_result(&mut out, id),
                55..=90 => {
                    let len = 500 + g.below(3500);
                    g.text_result(&mut out, id, len)
                }
                _ => g.error_response(&mut out, id),
            }
        }
        out.push(b'\n');
    }
    Corpus {
        bytes: out,
        messages: MESSAGES,
    }
}

/// Small control traffic: about 155 B per message, about 5 MB in all.
#[allow(dead_code)]
pub fn small() -> Corpus {
    const MESSAGES: usize = 32_000;
    let mut g = Gen::new(0x736d_616c_6c5f_7331);
    let mut out = Vec::with_capacity(MESSAGES * 160);
    for n in 0..MESSAGES {
        let id = g.id(n);
        match g.below(100) {
            0..=10 => g.ping_request(&mut out, id),
            11..=20 => g.empty_result(&mut out, id),
            21..=47 => g.tools_call_request(&mut out, id),
            48..=74 => g.progress_notification(&mut out),
            75..=90 => {
                let len = 40 + g.below(180);
                g.text_result(&mut out, id, len)
            }
            _ => g.error_response(&mut out, id),
        }
        out.push(b'\n');
    }
    Corpus {
        bytes: out,
        messages: MESSAGES,
    }
}

/// `tools/list` results only: 200 of them, 20 to 50 KB each, about 7 MB in all. Short keys,
/// nested schemas and short strings: the most structure per byte of any MCP message.
#[allow(dead_code)]
pub fn tools() -> Corpus {
    const MESSAGES: usize = 200;
    let mut g = Gen::new(0x746f_6f6c_735f_7431);
    let mut out = Vec::with_capacity(MESSAGES * 36_000);
    for n in 0..MESSAGES {
        let id = g.id(n);
        g.tools_list_result(&mut out, id);
        out.push(b'\n');
    }
    Corpus {
        bytes: out,
        messages: MESSAGES,
    }
}

// ---- Generator ---------------------------------------------------------------------------

#[allow(dead_code)]
enum GenId {
    Int(i64),
    Str(String),
}

const ASCII_WORDS: &[&str] = &[
    "the",
    "file",
    "config",
    "server",
    "request",
    "returned",
    "value",
    "index",
    "search",
    "matched",
    "line",
    "function",
    "error",
    "warning",
    "build",
    "test",
    "passed",
    "module",
    "path",
    "src/lib.rs",
    "async",
    "await",
    "token",
    "cache",
    "miss",
    "hit",
];

const NON_ASCII_WORDS: &[&str] = &[
    "résumé",
    "café",
    "naïve",
    "über",
    "Grüße",
    "日本語",
    "テスト",
    "数据",
    "🚀",
    "✅",
    "😀",
    "Ω",
    "→",
];

const TOOL_NAMES: &[&str] = &[
    "read_file",
    "write_file",
    "search_files",
    "list_directory",
    "run_command",
    "git_status",
    "fetch_url",
    "query_database",
    "get_weather",
    "create_issue",
];

const PROGRESS_MESSAGES: &[&str] = &[
    "Indexing files",
    "Downloading dependencies",
    "Running tests",
    "Analyzing results",
    "Compiling",
];

/// splitmix64 plus the message builders.
struct Gen {
    state: u64,
}

#[allow(dead_code)]
impl Gen {
    fn new(seed: u64) -> Self {
        Gen { state: seed }
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0; the tiny modulo bias does not matter here).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// Mostly integer ids, one in five a string id.
    fn id(&mut self, n: usize) -> GenId {
        if self.below(5) == 0 {
            GenId::Str(format!("req-{:04x}-{}", self.below(0x10000), n))
        } else {
            GenId::Int(n as i64 + 1)
        }
    }

    fn head(&mut self, out: &mut Vec<u8>, id: &GenId) {
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        match id {
            GenId::Int(n) => out.extend_from_slice(n.to_string().as_bytes()),
            GenId::Str(s) => {
                out.push(b'"');
                out.extend_from_slice(s.as_bytes());
                out.push(b'"');
            }
        }
    }

    /// Writes `s` as a JSON string, escaping what must be escaped and, now and then, writing a
    /// non-ASCII character as a `\u` escape (a surrogate pair outside the BMP).
    fn json_str(&mut self, out: &mut Vec<u8>, s: &str) {
        out.push(b'"');
        for c in s.chars() {
            match c {
                '"' => out.extend_from_slice(b"\\\""),
                '\\' => out.extend_from_slice(b"\\\\"),
                '\n' => out.extend_from_slice(b"\\n"),
                '\t' => out.extend_from_slice(b"\\t"),
                '\r' => out.extend_from_slice(b"\\r"),
                c if (c as u32) < 0x20 => {
                    out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
                }
                c if c.is_ascii() => out.push(c as u8),
                c => {
                    if self.below(4) == 0 {
                        let mut units = [0u16; 2];
                        for u in c.encode_utf16(&mut units) {
                            out.extend_from_slice(format!("\\u{:04x}", u).as_bytes());
                        }
                    } else {
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    }
                }
            }
        }
        out.push(b'"');
    }

    /// Prose of about `len` bytes (before escaping) with quotes, backslashes, tabs, newlines
    /// and non-ASCII words.
    fn prose(&mut self, len: usize) -> String {
        // Proportions of ordinary tool output: mostly ASCII words, a line break every dozen
        // words or so, and now and then a quote, a tab, a Windows path, a JSON snippet or a
        // non-ASCII word.
        let mut s = String::with_capacity(len + 16);
        while s.len() < len {
            match self.below(400) {
                0..=27 => s.push('\n'),
                28..=29 => s.push('\t'),
                30..=39 => {
                    s.push('"');
                    s.push_str(self.pick(ASCII_WORDS));
                    s.push_str("\" ");
                }
                40..=42 => s.push_str("C:\\Users\\dev "),
                43..=45 => s.push_str("{\"k\": [1, 2]} "),
                46..=65 => {
                    s.push_str(self.pick(NON_ASCII_WORDS));
                    s.push(' ');
                }
                _ => {
                    s.push_str(self.pick(ASCII_WORDS));
                    s.push(' ');
                }
            }
        }
        s
    }

    fn ping_request(&mut self, out: &mut Vec<u8>, id: GenId) {
        self.head(out, &id);
        out.extend_from_slice(b",\"method\":\"ping\"}");
    }

    fn empty_result(&mut self, out: &mut Vec<u8>, id: GenId) {
        self.head(out, &id);
        out.extend_from_slice(b",\"result\":{}}");
    }

    fn tools_call_request(&mut self, out: &mut Vec<u8>, id: GenId) {
        self.head(out, &id);
        out.extend_from_slice(
            b",\"method\":\"tools/call\",\"params\":{\"_meta\":{\"progressToken\":",
        );
        if self.below(2) == 0 {
            out.extend_from_slice(self.below(100_000).to_string().as_bytes());
        } else {
            out.extend_from_slice(format!("\"pt-{}\"", self.below(100_000)).as_bytes());
        }
        out.extend_from_slice(b"},\"name\":\"");
        let name = self.pick(TOOL_NAMES);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\",\"arguments\":{");
        match self.below(3) {
            0 => {
                out.extend_from_slice(b"\"path\":");
                let path = format!("/home/dev/project/src/{}.rs", self.pick(ASCII_WORDS));
                self.json_str(out, &path);
                out.extend_from_slice(b",\"limit\":");
                out.extend_from_slice(self.below(1000).to_string().as_bytes());
                out.extend_from_slice(b",\"recursive\":true");
            }
            1 => {
                out.extend_from_slice(b"\"query\":");
                let q = format!("{} {}", self.pick(ASCII_WORDS), self.pick(ASCII_WORDS));
                self.json_str(out, &q);
                out.extend_from_slice(
                    b",\"filters\":{\"lang\":[\"rust\",\"go\"],\"minScore\":0.75,\"since\":null}",
                );
            }
            _ => {
                out.extend_from_slice(b"\"city\":\"Z\\u00fcrich\",\"units\":\"metric\",\"days\":");
                out.extend_from_slice((1 + self.below(7)).to_string().as_bytes());
            }
        }
        out.extend_from_slice(b"}}}");
    }

    fn progress_notification(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":",
        );
        out.extend_from_slice(format!("\"pt-{}\"", self.below(100_000)).as_bytes());
        let total = 100 + self.below(900);
        let progress = self.below(total);
        out.extend_from_slice(b",\"progress\":");
        if self.below(3) == 0 {
            out.extend_from_slice(format!("{}.5", progress).as_bytes());
        } else {
            out.extend_from_slice(progress.to_string().as_bytes());
        }
        out.extend_from_slice(b",\"total\":");
        out.extend_from_slice(total.to_string().as_bytes());
        out.extend_from_slice(b",\"message\":\"");
        out.extend_from_slice(self.pick(PROGRESS_MESSAGES).as_bytes());
        out.extend_from_slice(b"\"}}");
    }

    /// A `tools/call` result with one text item of about `len` bytes.
    fn text_result(&mut self, out: &mut Vec<u8>, id: GenId, len: usize) {
        self.head(out, &id);
        out.extend_from_slice(b",\"result\":{\"content\":[{\"type\":\"text\",\"text\":");
        let text = self.prose(len);
        self.json_str(out, &text);
        out.extend_from_slice(b"}],\"isError\":");
        out.extend_from_slice(if self.below(20) == 0 {
            b"true"
        } else {
            b"false"
        });
        out.extend_from_slice(b"}}");
    }

    /// A `tools/list` result of 20 to 50 KB.
    fn tools_list_result(&mut self, out: &mut Vec<u8>, id: GenId) {
        let start = out.len();
        let target = 20_000 + self.below(30_000);
        self.head(out, &id);
        out.extend_from_slice(b",\"result\":{\"tools\":[");
        let mut i = 0;
        while out.len() - start < target {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(
                format!("{{\"name\":\"tool_{i}_{}\",", self.pick(TOOL_NAMES)).as_bytes(),
            );
            out.extend_from_slice(b"\"description\":");
            let desc_len = 60 + self.below(120);
            let desc = self.prose(desc_len);
            self.json_str(out, &desc);
            out.extend_from_slice(
                b",\"inputSchema\":{\"type\":\"object\",\"properties\":{\
                  \"path\":{\"type\":\"string\",\"description\":\"Absolute path to the file\"},\
                  \"recursive\":{\"type\":\"boolean\",\"default\":false},\
                  \"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,\"default\":100},\
                  \"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},\
                  \"required\":[\"path\"],\"additionalProperties\":false}",
            );
            if self.below(3) == 0 {
                out.extend_from_slice(
                    b",\"annotations\":{\"readOnlyHint\":true,\"openWorldHint\":false}",
                );
            }
            out.push(b'}');
            i += 1;
        }
        out.extend_from_slice(b"],\"nextCursor\":\"");
        out.extend_from_slice(format!("cursor-{}", self.below(1000)).as_bytes());
        out.extend_from_slice(b"\"}}");
    }

    /// A `resources/read` result holding 48 KiB of data as 64 KiB of base64.
    fn resource_blob_result(&mut self, out: &mut Vec<u8>, id: GenId) {
        self.head(out, &id);
        out.extend_from_slice(b",\"result\":{\"contents\":[{\"uri\":\"file:///data/blob-");
        out.extend_from_slice(self.below(1000).to_string().as_bytes());
        out.extend_from_slice(b".bin\",\"mimeType\":\"application/octet-stream\",\"blob\":\"");
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for _ in 0..(48 * 1024 / 3) {
            let v = self.next() as u32 & 0xff_ffff;
            for shift in [18, 12, 6, 0] {
                out.push(ALPHABET[((v >> shift) & 63) as usize]);
            }
        }
        out.extend_from_slice(b"\"}]}}");
    }

    fn error_response(&mut self, out: &mut Vec<u8>, id: GenId) {
        self.head(out, &id);
        if self.below(2) == 0 {
            out.extend_from_slice(b",\"error\":{\"code\":-32601,\"message\":");
            let m = format!(
                "Method not found: {}",
                self.pick(&["tools/run", "prompts/exec", "foo/bar"])
            );
            self.json_str(out, &m);
        } else {
            out.extend_from_slice(b",\"error\":{\"code\":-32602,\"message\":");
            let m = format!(
                "Invalid params: \"{}\" is required",
                self.pick(&["path", "query", "name"])
            );
            self.json_str(out, &m);
            if self.below(2) == 0 {
                out.extend_from_slice(b",\"data\":{\"field\":\"arguments.limit\",\"expected\":\"integer\",\"got\":\"string\"}");
            }
        }
        out.extend_from_slice(b"}}");
    }
}
