// mcpwire.hpp: a header-only C++17 RAII wrapper over the mcpwire C ABI (include/mcpwire.h).
//
// Handles are move-only owners (`mcpw::config`, `mcpw::connection`, `mcpw::http_server`,
// `mcpw::http_client`, `mcpw::tasks`): the destructor frees, a moved-from handle is empty, and
// nothing is ever freed twice. `mcpw::connection_view` is the non-owning kind, with every command and
// getter of `mcpw::connection`: what the HTTP handles lend for their connections. Everything
// else is a thin, inline translation: std::string_view for pointer + length, std::optional
// for "absent".
//
// Errors are exceptions (`mcpw::error`, carrying the mcpw_result code). Why not an
// expected-style result: a constructor can only report failure by throwing, and every error
// the C ABI returns is either misuse (a NULL or malformed argument: a bug in the caller) or a
// command the engine refused while leaving the connection unchanged. The hot path
// (poll_event, transmit, consume and handle_input) fails only on misuse, so exceptions keep
// the common code straight-line at no cost, and C++17 has no std::expected to build on. Some
// refusals are routine under load or as sessions come and go: MCPW_ERR_OUTPUT_FULL
// (backpressure: write some output, then give the command again), MCPW_ERR_TOO_MANY_IN_FLIGHT,
// MCPW_ERR_NO_PROGRESS_TOKEN, MCPW_ERR_UNKNOWN_CONNECTION (a session that ended),
// MCPW_ERR_TASKS_FULL. Catch mcpw::error and look at code() around those commands, or call
// the C function on `get()` where one is frequent. After MCPW_ERR_PANIC or MCPW_ERR_POISONED
// the handle refuses everything: drop it and make another.
//
// Lifetimes are the C ABI's: every string_view an event or getter returns points into the
// connection (or the HTTP handle that lent it) and stays valid until the next non-const call
// on it. Keep an id beyond that with `mcpw::owned_id`. A view may be passed back into a
// command on the same handle (answering a request with its id), but not into the transport
// inputs, which read their arguments in place while the handle changes: conn::handle_input,
// http_server::handle_request and http_client::handle_response / handle_body. Copy it into a
// std::string first (a session id from http_server::session_id as a header, say).
#ifndef MCPWIRE_HPP
#define MCPWIRE_HPP

// One clear error instead of hundreds from the first std::optional (MSVC reports its
// language version in _MSVC_LANG unless /Zc:__cplusplus is given).
#if (defined(_MSVC_LANG) ? _MSVC_LANG : __cplusplus) < 201703L
#error "mcpwire.hpp needs C++17 or later (-std=c++17)"
#endif

#include "mcpwire.h"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace mcpw {

// ---- Errors --------------------------------------------------------------------------------

/// A call the C ABI refused; `code()` says why.
class error : public std::runtime_error {
public:
    explicit error(mcpw_result code)
        : std::runtime_error(mcpw_result_message(static_cast<int>(code))), code_(code) {}
    /// An error whose what() adds `detail` (what was refused, and why) after the code's text.
    error(mcpw_result code, const std::string &detail)
        : std::runtime_error(std::string(mcpw_result_message(static_cast<int>(code))) + ": " +
                             detail),
          code_(code) {}
    mcpw_result code() const noexcept { return code_; }

private:
    mcpw_result code_;
};

namespace detail {

/// Enables a deleted overload for a temporary std::string only (a literal, a string_view or
/// an lvalue string still take the string_view overload).
template <class S>
using if_temporary_string =
    std::enable_if_t<std::is_same_v<std::remove_cv_t<S>, std::string>, int>;

inline void check(mcpw_result rc) {
    if (rc != MCPW_OK) throw error(rc);
}

// The text of mcpw_tools_refusals for `tools` into `text`, without throwing.
inline mcpw_result tools_refusals(std::string_view tools, std::string &text) {
    std::size_t len = 0;
    mcpw_result rc = mcpw_tools_refusals(tools.data(), tools.size(), nullptr, 0, &len);
    if (rc != MCPW_OK) return rc;
    text.assign(len + 1, '\0');
    rc = mcpw_tools_refusals(tools.data(), tools.size(), text.data(), text.size(), &len);
    text.resize(rc == MCPW_OK ? len : 0);
    return rc;
}

// Throws `rc` naming the tools refused in `tools`, when the refusal came from them (a config
// that is not a server's is refused with no tool to name: check then throws the plain code).
inline void refused(mcpw_result rc, std::string_view tools) {
    std::string text;
    if (tools_refusals(tools, text) == MCPW_OK && text.size() > 2) throw error(rc, text);
}

// A duration in whole milliseconds for the C ABI. A negative one is refused
// (MCPW_ERR_INVALID_ARGUMENT): cast to an unsigned count it would read as about 2^64 ms, which
// the C checks take for "no limit" (a deadline computed as `deadline - now` goes negative).
inline std::uint64_t millis(std::chrono::milliseconds d) {
    if (d.count() < 0) throw error(MCPW_ERR_INVALID_ARGUMENT);
    return static_cast<std::uint64_t>(d.count());
}

inline std::string_view view(mcpw_str s) noexcept {
    return s.ptr != nullptr ? std::string_view(s.ptr, s.len) : std::string_view();
}

inline std::optional<std::string_view> optional_view(mcpw_str s) {
    if (s.ptr == nullptr) return std::nullopt;
    return std::string_view(s.ptr, s.len);
}

// Absent text travels as NULL, present text (even empty) as a non-NULL pointer.
inline const char *ptr_or_null(const std::optional<std::string_view> &s) noexcept {
    if (!s) return nullptr;
    return s->data() != nullptr ? s->data() : "";
}

inline std::size_t len_or_zero(const std::optional<std::string_view> &s) noexcept {
    return s ? s->size() : 0;
}

} // namespace detail

// ---- The owning handle ---------------------------------------------------------------------

/// Unique ownership of a C handle freed by `Free` (which accepts NULL). Move-only.
template <typename T, void (*Free)(T *)>
class handle {
public:
    handle() noexcept = default;
    explicit handle(T *raw) noexcept : raw_(raw) {}
    handle(const handle &) = delete;
    handle &operator=(const handle &) = delete;
    handle(handle &&other) noexcept : raw_(std::exchange(other.raw_, nullptr)) {}
    handle &operator=(handle &&other) noexcept {
        if (this != &other) reset(std::exchange(other.raw_, nullptr));
        return *this;
    }
    ~handle() { Free(raw_); }

    T *get() const noexcept { return raw_; }
    explicit operator bool() const noexcept { return raw_ != nullptr; }
    void reset(T *raw = nullptr) noexcept { Free(std::exchange(raw_, raw)); }

private:
    T *raw_ = nullptr;
};

// ---- Ids ------------------------------------------------------------------------------------

/// A copy of one of the peer's request ids that outlives the event it came with.
class owned_id {
public:
    /// Reads `integer` for an integer id only: a C caller may leave it unset in a string id.
    explicit owned_id(const mcpw_id &id)
        : kind_(id.kind), integer_(id.kind == MCPW_ID_INT ? id.integer : 0),
          text_(id.kind == MCPW_ID_STRING && id.string.ptr != nullptr
                    ? std::string(id.string.ptr, id.string.len)
                    : std::string()) {}

    /// The C view; valid while this object lives and is unchanged.
    mcpw_id get() const noexcept {
        mcpw_id id;
        id.kind = kind_;
        id.integer = integer_;
        id.string.ptr = kind_ == MCPW_ID_STRING ? text_.c_str() : nullptr;
        id.string.len = kind_ == MCPW_ID_STRING ? text_.size() : 0;
        return id;
    }

    bool is_string() const noexcept { return kind_ == MCPW_ID_STRING; }
    std::int64_t integer() const noexcept { return integer_; }
    /// The wire form of a string id (escapes kept).
    const std::string &text() const noexcept { return text_; }

    friend bool operator==(const owned_id &a, const owned_id &b) noexcept {
        if (a.kind_ != b.kind_) return false;
        return a.kind_ == MCPW_ID_STRING ? a.text_ == b.text_ : a.integer_ == b.integer_;
    }
    friend bool operator!=(const owned_id &a, const owned_id &b) noexcept { return !(a == b); }

private:
    std::uint32_t kind_;
    std::int64_t integer_;
    std::string text_;
};

// ---- Events ---------------------------------------------------------------------------------

/// One event (see mcpw_event in mcpwire.h). Its views live until the next non-const call on
/// what handed it out: the connection, or the http_server or http_client that lent it (a
/// command on its lent connection view does not end them).
class event {
public:
    explicit event(const mcpw_event &raw) noexcept : raw_(raw) {}

    mcpw_event_kind kind() const noexcept { return raw_.kind; }
    const mcpw_event &raw() const noexcept { return raw_; }

    std::int64_t request() const noexcept { return raw_.request; }
    const mcpw_id &id() const noexcept { return raw_.id; }
    std::string_view method() const noexcept { return detail::view(raw_.method); }
    std::optional<std::string_view> params() const { return detail::optional_view(raw_.params); }
    std::string_view result() const noexcept { return detail::view(raw_.result); }
    std::int64_t code() const noexcept { return raw_.code; }
    std::optional<std::string_view> message() const { return detail::optional_view(raw_.message); }
    std::optional<std::string_view> data() const { return detail::optional_view(raw_.data); }
    std::optional<std::string_view> reason() const { return detail::optional_view(raw_.reason); }
    std::optional<std::string_view> input_requests() const {
        return detail::optional_view(raw_.input_requests);
    }
    std::optional<std::string_view> request_state() const {
        return detail::optional_view(raw_.request_state);
    }
    /// The CreateTaskResult of MCPW_EVENT_TASK_CREATED, raw JSON (the same view as result()).
    std::string_view task() const noexcept { return detail::view(raw_.result); }
    /// The elicitations array of MCPW_EVENT_URL_ELICITATION_REQUIRED, raw JSON (the same view
    /// as data()).
    std::string_view elicitations() const noexcept { return detail::view(raw_.data); }
    /// The elicitationId of MCPW_EVENT_ELICITATION_COMPLETE (the same view as message()).
    std::string_view elicitation_id() const noexcept { return detail::view(raw_.message); }
    double progress() const noexcept { return raw_.progress; }
    std::optional<double> total() const {
        if (!raw_.has_total) return std::nullopt;
        return raw_.total;
    }
    std::string_view version() const noexcept { return detail::view(raw_.version); }
    mcpw_close_reason close_reason() const noexcept { return raw_.close_reason; }
    mcpw_violation violation() const noexcept { return raw_.violation; }
    mcpw_decode_reason decode_reason() const noexcept { return raw_.decode_reason; }

private:
    mcpw_event raw_;
};

// ---- Config ---------------------------------------------------------------------------------

enum class role : std::uint32_t { client = MCPW_ROLE_CLIENT, server = MCPW_ROLE_SERVER };

enum class client_era : std::uint32_t {
    automatic = MCPW_CLIENT_ERA_AUTO,
    legacy = MCPW_CLIENT_ERA_LEGACY,
    modern = MCPW_CLIENT_ERA_MODERN,
};

enum class log_level : std::uint32_t {
    emergency = MCPW_LOG_EMERGENCY,
    alert = MCPW_LOG_ALERT,
    critical = MCPW_LOG_CRITICAL,
    error = MCPW_LOG_ERROR,
    warning = MCPW_LOG_WARNING,
    notice = MCPW_LOG_NOTICE,
    info = MCPW_LOG_INFO,
    debug = MCPW_LOG_DEBUG,
};

/// A connection's settings (mcpw_config). Setters return *this for chaining.
class config {
public:
    config(role r, std::string_view name, std::string_view version) {
        mcpw_config *raw = nullptr;
        detail::check(mcpw_config_new(static_cast<std::uint32_t>(r), name.data(), name.size(),
                                      version.data(), version.size(), &raw));
        handle_.reset(raw);
    }

    /// The protocol versions this connection speaks; the default, before any call, is every
    /// one the library knows. An empty list is taken, and then refused when a connection is
    /// made from the config (MCPW_ERR_CONFIG_REFUSED): a connection must speak some version.
    config &versions(std::initializer_list<std::string_view> list) {
        return versions<std::initializer_list<std::string_view>>(list);
    }
    /// The same from any range of strings: a std::vector<std::string> read from a
    /// configuration file, say. (The strings are copied first: a range that makes each one
    /// as it goes, a transform view, leaves none behind to point at.)
    template <class Range,
              class = decltype(std::string(*std::declval<const Range &>().begin()))>
    config &versions(const Range &list) {
        std::vector<std::string> owned;
        for (const auto &v : list) owned.emplace_back(v);
        std::vector<mcpw_str> strs;
        strs.reserve(owned.size());
        for (const std::string &s : owned) strs.push_back(mcpw_str{s.data(), s.size()});
        detail::check(mcpw_config_set_versions(get(), strs.data(), strs.size()));
        return *this;
    }
    config &info(std::string_view json) {
        detail::check(mcpw_config_set_info(get(), json.data(), json.size()));
        return *this;
    }
    config &capabilities(std::string_view json) {
        detail::check(mcpw_config_set_capabilities(get(), json.data(), json.size()));
        return *this;
    }
    config &instructions(std::optional<std::string_view> text) {
        detail::check(mcpw_config_set_instructions(get(), detail::ptr_or_null(text),
                                                   detail::len_or_zero(text)));
        return *this;
    }
    config &era(client_era e) {
        detail::check(mcpw_config_set_client_era(get(), static_cast<std::uint32_t>(e)));
        return *this;
    }
    config &discover_timeout(std::chrono::milliseconds timeout) {
        detail::check(
            mcpw_config_set_discover_timeout(get(), detail::millis(timeout)));
        return *this;
    }
    config &discover_cache(std::chrono::milliseconds ttl, mcpw_cache_scope scope) {
        detail::check(mcpw_config_set_discover_cache(get(), detail::millis(ttl),
                                                     static_cast<std::uint32_t>(scope)));
        return *this;
    }
    config &timeouts(std::chrono::milliseconds request, std::chrono::milliseconds max_total) {
        detail::check(mcpw_config_set_timeouts(get(), detail::millis(request),
                                               detail::millis(max_total)));
        return *this;
    }
    mcpw_limits limits() const {
        mcpw_limits l;
        detail::check(mcpw_config_get_limits(get(), &l));
        return l;
    }
    config &limits(const mcpw_limits &l) {
        detail::check(mcpw_config_set_limits(get(), &l));
        return *this;
    }
    std::uint32_t policy() const {
        std::uint32_t flags = 0;
        detail::check(mcpw_config_get_policy(get(), &flags));
        return flags;
    }
    config &policy(std::uint32_t flags) {
        detail::check(mcpw_config_set_policy(get(), flags));
        return *this;
    }

    mcpw_config *get() const noexcept { return handle_.get(); }

private:
    handle<mcpw_config, mcpw_config_free> handle_;
};

// ---- Connection -----------------------------------------------------------------------------

/// Bytes lent by connection::transmit: valid until the next non-const call.
struct transmit_view {
    const std::uint8_t *data = nullptr;
    std::size_t size = 0;
    std::uint64_t stream = 0;
    bool empty() const noexcept { return size == 0; }
};

/// One item of a 2026-07-28 subscriptions/listen request (mcpw_listen_item), its text copied.
struct listen_item {
    std::uint32_t kind = 0; ///< one of mcpw_listen_item_kind
    std::string text;       ///< the resource URI or task id; empty for the list changes
    bool operator==(const listen_item &o) const { return kind == o.kind && text == o.text; }
    bool operator!=(const listen_item &o) const { return !(*this == o); }
};

namespace detail {

/// Every mcpw_conn_* call, for connection (which owns its handle) and connection_view (which
/// does not). `Self::get()` gives the handle.
template <typename Self>
class connection_ops {
public:
    // -- inputs --
    /// Bytes from the peer. Not a view this handle lent (read in place while it changes).
    void handle_input(std::uint64_t now_ns, const void *bytes, std::size_t len) {
        detail::check(
            mcpw_conn_handle_input(get(), now_ns, static_cast<const std::uint8_t *>(bytes), len));
    }
    void handle_input(std::uint64_t now_ns, std::string_view bytes) {
        handle_input(now_ns, bytes.data(), bytes.size());
    }
    /// One whole message from a message transport (an HTTP body), answered on `stream`.
    void handle_frame(std::uint64_t now_ns, std::uint64_t stream, std::string_view frame) {
        detail::check(mcpw_conn_handle_frame(get(), now_ns, stream,
                                             reinterpret_cast<const std::uint8_t *>(frame.data()),
                                             frame.size()));
    }
    void handle_eof(std::uint64_t now_ns) { detail::check(mcpw_conn_handle_eof(get(), now_ns)); }
    void handle_timeout(std::uint64_t now_ns) {
        detail::check(mcpw_conn_handle_timeout(get(), now_ns));
    }

    // -- outputs --
    /// The next event, or nullopt when there is none.
    std::optional<event> poll_event() {
        mcpw_event raw;
        detail::check(mcpw_conn_poll_event(get(), &raw));
        if (raw.kind == MCPW_EVENT_NONE) return std::nullopt;
        return event(raw);
    }
    transmit_view transmit() const {
        transmit_view t;
        detail::check(mcpw_conn_transmit(get(), &t.data, &t.size, &t.stream));
        return t;
    }
    void consume(std::size_t n) { detail::check(mcpw_conn_consume(get(), n)); }
    /// The next deadline (ns, on the caller's clock), or nullopt when no timer is armed.
    std::optional<std::uint64_t> poll_timeout() const {
        bool has = false;
        std::uint64_t deadline = 0;
        detail::check(mcpw_conn_poll_timeout(get(), &has, &deadline));
        if (!has) return std::nullopt;
        return deadline;
    }

    // -- commands --
    std::int64_t request(std::uint64_t now_ns, std::string_view method,
                         std::optional<std::string_view> params = std::nullopt,
                         const mcpw_request_options &options = mcpw_request_options()) {
        std::int64_t id = 0;
        detail::check(mcpw_conn_request(get(), now_ns, method.data(), method.size(),
                                        detail::ptr_or_null(params), detail::len_or_zero(params),
                                        &options, &id));
        return id;
    }
    /// A request on behalf of the peer's request `parent` (travels on its stream).
    std::int64_t request_related(std::uint64_t now_ns, const mcpw_id &parent,
                                 std::string_view method,
                                 std::optional<std::string_view> params = std::nullopt,
                                 const mcpw_request_options &options = mcpw_request_options()) {
        std::int64_t id = 0;
        detail::check(mcpw_conn_request_related(get(), now_ns, &parent, method.data(),
                                                method.size(), detail::ptr_or_null(params),
                                                detail::len_or_zero(params), &options, &id));
        return id;
    }
    /// 2026-07-28 client: re-sends a request that ended with MCPW_EVENT_INPUT_REQUIRED.
    std::int64_t retry(std::uint64_t now_ns, std::int64_t request,
                       std::optional<std::string_view> input_responses = std::nullopt) {
        std::int64_t id = 0;
        detail::check(mcpw_conn_retry(get(), now_ns, request, detail::ptr_or_null(input_responses),
                                      detail::len_or_zero(input_responses), &id));
        return id;
    }
    void notify(std::string_view method, std::optional<std::string_view> params = std::nullopt) {
        detail::check(mcpw_conn_notify(get(), method.data(), method.size(),
                                       detail::ptr_or_null(params), detail::len_or_zero(params)));
    }
    void respond(const mcpw_id &id, std::string_view result) {
        detail::check(mcpw_conn_respond(get(), &id, result.data(), result.size()));
    }
    void respond_error(const mcpw_id &id, std::int64_t code, std::string_view message,
                       std::optional<std::string_view> data = std::nullopt) {
        detail::check(mcpw_conn_respond_error(get(), &id, code, message.data(), message.size(),
                                              detail::ptr_or_null(data),
                                              detail::len_or_zero(data)));
    }
    /// 2026-07-28 server, with MCPW_POLICY_REVIEW_LISTENS: what the listen request `id` asks
    /// to hear and we can honour, copied (throws MCPW_ERR_UNKNOWN_REQUEST unless it waits for
    /// its grant).
    std::vector<listen_item> listen_items(const mcpw_id &id) const {
        std::size_t n = 0;
        detail::check(mcpw_conn_listen_items(get(), &id, nullptr, 0, &n));
        std::vector<mcpw_listen_item> raw(n);
        if (n > 0) detail::check(mcpw_conn_listen_items(get(), &id, raw.data(), n, &n));
        std::vector<listen_item> items;
        items.reserve(n);
        for (std::size_t i = 0; i < n && i < raw.size(); i++)
            items.push_back(listen_item{raw[i].kind, std::string(detail::view(raw[i].text))});
        return items;
    }
    /// Grants the listen request `id` the items for which `keep(const listen_item &)` returns
    /// true (check access there), and sends its acknowledgement. `id` is copied first, so
    /// `keep` may change the connection (feed it input, say) that `id` points into. Should
    /// `keep` change the connection so that the listen is no longer the one it judged (the client
    /// cancelled it and sent another under the same id, which the engine allows only once it
    /// has forgotten the cancelled id: see `mcpw_limits.max_remembered_ids`), nothing is
    /// granted and MCPW_ERR_UNKNOWN_REQUEST is thrown. A listen the client cancelled is granted
    /// nothing, without an error, as the C ABI does.
    template <class Keep> void grant_listen(const mcpw_id &lent_id, Keep &&keep) {
        const owned_id copy(lent_id);
        const mcpw_id id = copy.get();
        std::vector<listen_item> items;
        try {
            items = listen_items(id);
        } catch (const error &e) {
            if (e.code() != MCPW_ERR_UNKNOWN_REQUEST) throw;
            // Not waiting: the engine tells a cancelled listen (no error) from an unknown id.
            detail::check(mcpw_conn_grant_listen(get(), &id, nullptr, 0));
            return;
        }
        std::unique_ptr<bool[]> flags(new bool[items.empty() ? 1 : items.size()]);
        for (std::size_t i = 0; i < items.size(); i++) flags[i] = keep(items[i]);
        std::vector<listen_item> now;
        try {
            now = listen_items(id);
        } catch (const error &e) {
            if (e.code() != MCPW_ERR_UNKNOWN_REQUEST) throw;
            detail::check(mcpw_conn_grant_listen(get(), &id, nullptr, 0));
            return;
        }
        if (now != items) throw error(MCPW_ERR_UNKNOWN_REQUEST);
        detail::check(mcpw_conn_grant_listen(get(), &id, flags.get(), items.size()));
    }
    void progress(const mcpw_id &id, double value, std::optional<double> total = std::nullopt,
                  std::optional<std::string_view> message = std::nullopt) {
        detail::check(mcpw_conn_progress(get(), &id, value, total.value_or(0.0),
                                         total.has_value(), detail::ptr_or_null(message),
                                         detail::len_or_zero(message)));
    }
    /// Server: a log message about the peer's request `id`; returns whether it was sent.
    bool log(const mcpw_id &id, log_level level, std::string_view data,
             std::optional<std::string_view> logger = std::nullopt) {
        bool sent = false;
        detail::check(mcpw_conn_log(get(), &id, static_cast<std::uint32_t>(level),
                                    detail::ptr_or_null(logger), detail::len_or_zero(logger),
                                    data.data(), data.size(), &sent));
        return sent;
    }
    /// 2026-07-28 server: answers with "input required".
    void respond_input_required(const mcpw_id &id,
                                std::optional<std::string_view> input_requests,
                                std::optional<std::string_view> request_state = std::nullopt) {
        detail::check(mcpw_conn_respond_input_required(
            get(), &id, detail::ptr_or_null(input_requests), detail::len_or_zero(input_requests),
            detail::ptr_or_null(request_state), detail::len_or_zero(request_state)));
    }
    /// 2025-11-25 server: answers with -32042, URL elicitation required (`elicitations` is the
    /// JSON array); the client gets MCPW_EVENT_URL_ELICITATION_REQUIRED.
    void respond_url_elicitation_required(const mcpw_id &id, std::string_view elicitations) {
        detail::check(mcpw_conn_respond_url_elicitation_required(get(), &id, elicitations.data(),
                                                                 elicitations.size()));
    }
    void cancel(std::uint64_t now_ns, std::int64_t request,
                std::optional<std::string_view> reason = std::nullopt) {
        detail::check(mcpw_conn_cancel(get(), now_ns, request, detail::ptr_or_null(reason),
                                       detail::len_or_zero(reason)));
    }
    void close(std::uint64_t now_ns, std::chrono::milliseconds grace) {
        detail::check(mcpw_conn_close(get(), now_ns, detail::millis(grace)));
    }
    /// Answers the peer's requests still in flight (not 2026-07-28 listens) with -32603 and
    /// `message`, when nothing will answer them (a host that stops, before close()); how many.
    std::size_t refuse_peer_requests(std::string_view message) {
        std::size_t n = 0;
        detail::check(mcpw_conn_refuse_peer_requests(get(), message.data(), message.size(), &n));
        return n;
    }

    // -- getters --
    mcpw_state state() const {
        mcpw_state s;
        detail::check(mcpw_conn_state(get(), &s));
        return s;
    }
    role get_role() const {
        mcpw_role r;
        detail::check(mcpw_conn_role(get(), &r));
        return static_cast<role>(r);
    }
    /// How much input to give `handle_input` at a time when a read brought more (4 KiB, less
    /// under lowered limits), answering between pieces.
    std::size_t input_piece() const {
        std::size_t n;
        detail::check(mcpw_conn_input_piece(get(), &n));
        return n;
    }
    mcpw_era era() const {
        mcpw_era e;
        detail::check(mcpw_conn_era(get(), &e));
        return e;
    }
    /// What the peer's 2026-07-28 request `id` declared (`known` false otherwise).
    mcpw_request_context request_context(const mcpw_id &id) const {
        mcpw_request_context c;
        detail::check(mcpw_conn_request_context(get(), &id, &c));
        return c;
    }
    std::optional<std::string_view> protocol_version() const {
        mcpw_str s;
        detail::check(mcpw_conn_protocol_version(get(), &s));
        return detail::optional_view(s);
    }
    std::optional<std::string_view> peer_info() const {
        mcpw_str s;
        detail::check(mcpw_conn_peer_info(get(), &s));
        return detail::optional_view(s);
    }
    std::optional<std::string_view> peer_capabilities() const {
        mcpw_str s;
        detail::check(mcpw_conn_peer_capabilities(get(), &s));
        return detail::optional_view(s);
    }
    std::optional<std::string_view> peer_instructions() const {
        mcpw_str s;
        detail::check(mcpw_conn_peer_instructions(get(), &s));
        return detail::optional_view(s);
    }
    mcpw_stats stats() const {
        mcpw_stats s;
        detail::check(mcpw_conn_stats(get(), &s));
        return s;
    }
    /// Client, 2025-11-25: how many notifications/elicitation/complete the engine dropped
    /// (unknown or already completed elicitation ids), to see a server that repeats them.
    std::uint64_t ignored_elicitation_completions() const {
        std::uint64_t n = 0;
        detail::check(mcpw_conn_ignored_elicitation_completions(get(), &n));
        return n;
    }
    /// (ours, the peer's) requests awaiting an answer.
    std::pair<std::size_t, std::size_t> in_flight() const {
        std::size_t ours = 0, peers = 0;
        detail::check(mcpw_conn_in_flight(get(), &ours, &peers));
        return {ours, peers};
    }

protected:
    connection_ops() = default;

private:
    mcpw_conn *get() const noexcept { return static_cast<const Self &>(*this).get(); }
};

} // namespace detail

/// A connection the caller does not own: what mcpw::http_server and mcpw::http_client lend
/// (their `conn()`, and each server event's), or any connection's `view()`. Every command and
/// getter of mcpw::connection, with the C ABI's rules for views: use it before the next
/// non-const call on its lender and ask again after that. A stale view of a connection that
/// still lives throws MCPW_ERR_STALE_VIEW, but a view of an ended session or finished request
/// may be freed by then: keeping a view past its lender's next call is undefined behaviour,
/// so keep the key (the std::uint64_t of server_event::key) and ask the lender again. On a
/// view an HTTP handle lent, the transport calls (handle_input, transmit, consume, ...),
/// the timers (handle_timeout, poll_timeout) and poll_event throw MCPW_ERR_NOT_OWNER,
/// because the lender moves the bytes, fires the timers (with its own) and hands out the
/// events. Copying it is free; it never frees anything.
class connection_view : public detail::connection_ops<connection_view> {
public:
    connection_view() noexcept = default;
    explicit connection_view(mcpw_conn *raw) noexcept : raw_(raw) {}

    mcpw_conn *get() const noexcept { return raw_; }
    explicit operator bool() const noexcept { return raw_ != nullptr; }

private:
    mcpw_conn *raw_ = nullptr;
};

/// One MCP connection (mcpw_conn) that owns its transport. Drain poll_event, then
/// transmit/consume, then poll_timeout after every input or command.
class connection : public detail::connection_ops<connection> {
public:
    connection(const config &cfg, std::uint64_t now_ns) {
        mcpw_conn *raw = nullptr;
        detail::check(mcpw_conn_new(cfg.get(), now_ns, &raw));
        handle_.reset(raw);
    }

    /// A non-owning view of this connection (for code written against connection_view). Not
    /// const (the view can issue commands), and not of a temporary (it would dangle at once).
    connection_view view() & noexcept { return connection_view(get()); }
    operator connection_view() & noexcept { return view(); }
    connection_view view() && = delete;
    operator connection_view() && = delete;

    mcpw_conn *get() const noexcept { return handle_.get(); }

private:
    handle<mcpw_conn, mcpw_conn_free> handle_;
};

// ---- Tasks (the io.modelcontextprotocol/tasks extension, 2026-07-28) -----------------------

/// What the client did to a task (mcpw_task_event): its views live until the next non-const
/// call on the tasks table that produced it.
class task_event {
public:
    explicit task_event(const mcpw_task_event &raw) noexcept : raw_(raw) {}

    mcpw_task_event_kind kind() const noexcept { return raw_.kind; }
    const mcpw_task_event &raw() const noexcept { return raw_; }
    /// The task's id.
    std::string_view task() const noexcept { return detail::view(raw_.task); }
    /// The input request's key (MCPW_TASK_EVENT_INPUT).
    std::string_view key() const noexcept { return detail::view(raw_.key); }
    /// The client's answer, raw JSON (MCPW_TASK_EVENT_INPUT).
    std::string_view response() const noexcept { return detail::view(raw_.response); }

private:
    mcpw_task_event raw_;
};

/// A 2025-11-25 tasks/result that can be answered now (mcpw_task_result): its views live until
/// the next non-const call on the tasks table that produced it. Answer it with
/// tasks::write_result on the connection of owner().
class task_result {
public:
    explicit task_result(const mcpw_task_result &raw) noexcept : raw_(raw) {}

    const mcpw_task_result &raw() const noexcept { return raw_; }
    /// Whose task it was (as given to tasks::create_legacy).
    std::uint64_t owner() const noexcept { return raw_.owner; }
    /// The waiting tasks/result request's id.
    const mcpw_id &id() const noexcept { return raw_.id; }
    bool is_error() const noexcept { return raw_.is_error; }
    /// The result, raw JSON (when not is_error()).
    std::string_view result() const noexcept { return detail::view(raw_.result); }
    /// The error (when is_error()).
    std::int64_t code() const noexcept { return raw_.code; }
    std::string_view message() const noexcept { return detail::view(raw_.message); }
    std::optional<std::string_view> data() const { return detail::optional_view(raw_.data); }

private:
    mcpw_task_result raw_;
};

/// A server's task table (mcpw_tasks), apart from any connection because a task outlives the
/// request that created it: keep one per server. Create a task for a tools/call that declared
/// the extension and answer it with respond(); pass every request to serve() first (it answers
/// tasks/get, tasks/update and tasks/cancel); move tasks along with ask, set_message, complete,
/// fail and cancel; drain poll_event after serve and handle_timeout. The 2025-11-25 tasks use
/// create_legacy, serve_legacy, resume, poll_result and write_result. Move-only.
class tasks {
public:
    /// `now_ns` (your monotonic clock) and `unix_ms` (the wall clock, ms since 1970) are the
    /// same instant: the times tasks carry are counted from them.
    tasks(std::uint64_t now_ns, std::uint64_t unix_ms,
          const mcpw_task_config &config = mcpw_task_config_default()) {
        mcpw_tasks *raw = nullptr;
        detail::check(mcpw_tasks_new(&config, now_ns, unix_ms, &raw));
        handle_.reset(raw);
    }

    /// Creates a working task with an id drawn from `random` (a cryptographically secure
    /// source; must not throw or call back into the table), and returns a copy of the id
    /// (the table's own view of it ends at the next create). MCPW_ERR_TASKS_FULL when no room
    /// can be made.
    std::string create(std::uint64_t now_ns,
                       const std::function<void(std::uint8_t *, std::size_t)> &random) {
        mcpw_str id;
        if (!random) throw error(MCPW_ERR_NULL_ARGUMENT); // (fill may not throw)
        void *user = const_cast<void *>(static_cast<const void *>(&random));
        detail::check(mcpw_tasks_create(get(), now_ns, &fill, user, &id));
        return std::string(detail::view(id));
    }
    /// create() for a 2025-11-25 task-augmented request, owned by `owner` (the session or
    /// connection that asked; serve_legacy shows a requestor its own tasks only).
    std::string create_legacy(std::uint64_t now_ns,
                              const std::function<void(std::uint8_t *, std::size_t)> &random,
                              std::uint64_t owner) {
        mcpw_str id;
        if (!random) throw error(MCPW_ERR_NULL_ARGUMENT); // (fill may not throw)
        void *user = const_cast<void *>(static_cast<const void *>(&random));
        detail::check(mcpw_tasks_create_legacy(get(), now_ns, &fill, user, owner, &id));
        return std::string(detail::view(id));
    }
    /// Answers the peer's tools/call `id` on `conn` with the handle of `task`
    /// (mcpw_conn_respond_task). Throws MCPW_ERR_NOT_NEGOTIATED when the request, or the
    /// server's own capabilities, did not declare the extension: answer it normally then.
    void respond(connection_view conn, const mcpw_id &id, std::string_view task) const {
        detail::check(mcpw_conn_respond_task(conn.get(), &id, get(), task.data(), task.size()));
    }
    /// Answers `id` on `conn` when `method` is tasks/get, tasks/update or tasks/cancel; false
    /// (nothing answered) for any other method. An error the connection throws while
    /// answering (MCPW_ERR_UNKNOWN_REQUEST, say) comes after the table took the request in: do
    /// not answer it again as if nothing had happened.
    bool serve(std::uint64_t now_ns, connection_view conn, const mcpw_id &id,
               std::string_view method, std::optional<std::string_view> params) {
        bool served = false;
        detail::check(mcpw_tasks_serve(get(), now_ns, conn.get(), &id, method.data(),
                                       method.size(), detail::ptr_or_null(params),
                                       detail::len_or_zero(params), &served));
        return served;
    }
    /// serve() for a request event of `conn`.
    bool serve(std::uint64_t now_ns, connection_view conn, const event &request) {
        return serve(now_ns, conn, request.id(), request.method(), request.params());
    }

    /// 2025-11-25: answers `id` on `conn`, from `owner`, when `method` is tasks/get,
    /// tasks/list, tasks/cancel or tasks/result (a tasks/result on a running task waits: see
    /// poll_result); false (nothing answered) for any other method. As with serve(), an error
    /// the connection throws comes after the table took the request in.
    bool serve_legacy(std::uint64_t now_ns, std::uint64_t owner, connection_view conn,
                      const mcpw_id &id, std::string_view method,
                      std::optional<std::string_view> params) {
        bool served = false;
        detail::check(mcpw_tasks_serve_legacy(get(), now_ns, owner, conn.get(), &id,
                                              method.data(), method.size(),
                                              detail::ptr_or_null(params),
                                              detail::len_or_zero(params), &served));
        return served;
    }
    /// serve_legacy() for a request event of `conn`.
    bool serve_legacy(std::uint64_t now_ns, std::uint64_t owner, connection_view conn,
                      const event &request) {
        return serve_legacy(now_ns, owner, conn, request.id(), request.method(),
                            request.params());
    }
    /// 2025-11-25: the next tasks/result that can be answered now, or nullopt.
    std::optional<task_result> poll_result() {
        mcpw_task_result raw;
        detail::check(mcpw_tasks_poll_result(get(), &raw));
        if (!raw.ready) return std::nullopt;
        return task_result(raw);
    }
    /// 2025-11-25: writes the answer poll_result() returned last to its request on `conn`.
    /// Throws MCPW_ERR_OUTPUT_FULL when the output is full: drain it, and the next
    /// poll_result() returns the same answer again.
    void write_result(connection_view conn) {
        detail::check(mcpw_tasks_write_result(get(), conn.get()));
    }

    /// The task's status; throws MCPW_ERR_UNKNOWN_TASK for an unknown task.
    mcpw_task_status status(std::string_view task) const {
        mcpw_task_status s;
        detail::check(mcpw_tasks_status(get(), task.data(), task.size(), &s));
        return s;
    }
    /// The status notification of `task` as it stands (mcpw_tasks_status_notification): its
    /// method (notifications/tasks, or notifications/tasks/status for a 2025-11-25 task) and
    /// params, views valid until the next non-const call on the table. Send it with
    /// connection::notify; throws MCPW_ERR_UNKNOWN_TASK for an unknown task.
    std::pair<std::string_view, std::string_view> status_notification(std::string_view task) {
        mcpw_str method, params;
        detail::check(
            mcpw_tasks_status_notification(get(), task.data(), task.size(), &method, &params));
        return {detail::view(method), detail::view(params)};
    }
    /// Whether the client asked to cancel the task (false for an unknown one).
    bool cancel_requested(std::string_view task) const {
        bool requested = false;
        detail::check(mcpw_tasks_cancel_requested(get(), task.data(), task.size(), &requested));
        return requested;
    }
    /// Sets the task's statusMessage, or clears it with nullopt.
    void set_message(std::uint64_t now_ns, std::string_view task,
                     std::optional<std::string_view> message) {
        detail::check(mcpw_tasks_set_message(get(), now_ns, task.data(), task.size(),
                                             detail::ptr_or_null(message),
                                             detail::len_or_zero(message)));
    }
    /// Asks the client for input: `request` (an input request of Multi Round-Trip Requests:
    /// elicitation/create, sampling/createMessage or roots/list) under `key`, answered as a
    /// MCPW_TASK_EVENT_INPUT.
    void ask(std::uint64_t now_ns, std::string_view task, std::string_view key,
             std::string_view request) {
        detail::check(mcpw_tasks_ask(get(), now_ns, task.data(), task.size(), key.data(),
                                     key.size(), request.data(), request.size()));
    }
    /// Finishes the task with `result` (a JSON object, what the request would have returned).
    void complete(std::uint64_t now_ns, std::string_view task, std::string_view result) {
        detail::check(mcpw_tasks_complete(get(), now_ns, task.data(), task.size(), result.data(),
                                          result.size()));
    }
    /// Fails the task with a JSON-RPC error.
    void fail(std::uint64_t now_ns, std::string_view task, std::int64_t code,
              std::string_view message, std::optional<std::string_view> data = std::nullopt) {
        detail::check(mcpw_tasks_fail(get(), now_ns, task.data(), task.size(), code,
                                      message.data(), message.size(), detail::ptr_or_null(data),
                                      detail::len_or_zero(data)));
    }
    /// Back to working after input_required (the 2025-11-25 flow).
    void resume(std::uint64_t now_ns, std::string_view task) {
        detail::check(mcpw_tasks_resume(get(), now_ns, task.data(), task.size()));
    }
    /// Ends the task as cancelled.
    void cancel(std::uint64_t now_ns, std::string_view task) {
        detail::check(mcpw_tasks_cancel(get(), now_ns, task.data(), task.size()));
    }

    /// The next task event, or nullopt when there is none.
    std::optional<task_event> poll_event() {
        mcpw_task_event raw;
        detail::check(mcpw_tasks_poll_event(get(), &raw));
        if (raw.kind == MCPW_TASK_EVENT_NONE) return std::nullopt;
        return task_event(raw);
    }
    /// When the next task expires (ns, on the caller's clock), or nullopt.
    std::optional<std::uint64_t> poll_timeout() const {
        bool has = false;
        std::uint64_t deadline = 0;
        detail::check(mcpw_tasks_poll_timeout(get(), &has, &deadline));
        if (!has) return std::nullopt;
        return deadline;
    }
    /// Deletes the tasks whose TTL ran out (live ones get MCPW_TASK_EVENT_EXPIRED).
    void handle_timeout(std::uint64_t now_ns) {
        detail::check(mcpw_tasks_handle_timeout(get(), now_ns));
    }

    mcpw_tasks *get() const noexcept { return handle_.get(); }

private:
    static void fill(void *user, std::uint8_t *buf, std::size_t len) noexcept {
        (*static_cast<const std::function<void(std::uint8_t *, std::size_t)> *>(user))(buf, len);
    }

    handle<mcpw_tasks, mcpw_tasks_free> handle_;
};

// ---- Streamable HTTP ------------------------------------------------------------------------
//
// mcpw::http_server answers the HTTP requests your HTTP library parsed; mcpw::http_client
// says which HTTP requests to make and reads their responses. Both own their handle (move-
// only, freed once) and lend connection_views for the commands. Everything they lend
// (responses, actions, stream bytes, events, views) lives until the next non-const call on
// the lender, as in the C ABI: hand it to your HTTP library, or copy it, first.

/// One header for the C ABI, as two views (`name` and `value` must outlive the call).
inline mcpw_http_header header(std::string_view name, std::string_view value) noexcept {
    mcpw_http_header h;
    h.name = mcpw_str{name.data(), name.size()};
    h.value = mcpw_str{value.data(), value.size()};
    return h;
}

/// Not for temporary strings: the header's views would outlive their text.
template <class S, detail::if_temporary_string<S> = 0>
mcpw_http_header header(S &&name, std::string_view value) = delete;
template <class S, detail::if_temporary_string<S> = 0>
mcpw_http_header header(std::string_view name, S &&value) = delete;

/// A run of headers that belong to someone else: what a response or an action lends, or what
/// you pass in (a vector that outlives this view). It stores no headers of its own, so it is
/// never built from a temporary: a braced list or a temporary vector goes straight to
/// handle_request or handle_response, which take one for the length of the call.
class http_headers {
public:
    http_headers() noexcept = default;
    http_headers(const mcpw_http_header *data, std::size_t size) noexcept
        : data_(size > 0 ? data : nullptr), size_(size) {}
    http_headers(const std::vector<mcpw_http_header> &headers) noexcept
        : http_headers(headers.data(), headers.size()) {}
    http_headers(std::vector<mcpw_http_header> &&) = delete;
    http_headers(const std::vector<mcpw_http_header> &&) = delete;

    const mcpw_http_header *begin() const noexcept { return data_; }
    const mcpw_http_header *end() const noexcept { return data_ + size_; }
    const mcpw_http_header *data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }

    /// The value of the first header called `name` (ASCII case ignored), or nullopt.
    std::optional<std::string_view> find(std::string_view name) const {
        for (const mcpw_http_header &h : *this) {
            std::string_view n = detail::view(h.name);
            if (n.size() != name.size()) continue;
            bool same = true;
            for (std::size_t i = 0; i < n.size() && same; i++) {
                same = lower(n[i]) == lower(name[i]);
            }
            if (same) return detail::view(h.value);
        }
        return std::nullopt;
    }

private:
    static char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

    const mcpw_http_header *data_ = nullptr;
    std::size_t size_ = 0;
};

/// The answer to one HTTP request (mcpw_http_response): status, headers, and either a whole
/// body or an SSE stream to drain with http_server::poll_stream.
class http_response {
public:
    explicit http_response(const mcpw_http_response &raw) noexcept : raw_(raw) {}

    std::uint16_t status() const noexcept { return raw_.status; }
    http_headers headers() const noexcept { return http_headers(raw_.headers, raw_.headers_len); }
    /// The whole body (empty for none); meaningless for a stream.
    std::string_view body() const noexcept {
        return raw_.body != nullptr
                   ? std::string_view(reinterpret_cast<const char *>(raw_.body), raw_.body_len)
                   : std::string_view();
    }
    /// The SSE stream, when the body is one.
    std::optional<std::uint64_t> stream() const {
        if (!raw_.has_stream) return std::nullopt;
        return raw_.stream;
    }
    const mcpw_http_response &raw() const noexcept { return raw_; }

private:
    mcpw_http_response raw_;
};

/// What waits on an SSE stream (http_server::poll_stream).
struct stream_chunk {
    const std::uint8_t *data = nullptr;
    std::size_t size = 0;
    /// End the response once this is written.
    bool finished = false;
    /// False for a stream nobody holds any more (it ended, or its client went away).
    bool open = false;

    std::string_view bytes() const noexcept {
        return data != nullptr ? std::string_view(reinterpret_cast<const char *>(data), size)
                               : std::string_view();
    }
};

/// An event from one of an http_server's connections, with the key that addresses that
/// connection later (http_server::conn) and a view to answer it with now.
struct server_event {
    event ev;
    std::uint64_t key;
    connection_view conn;
};

/// Calls back into the server with one stored event (event_store::replay). It lives only
/// during that replay call: the C sink and its context are valid until replay returns, and
/// calling it later would write into a server that has moved on. So it can be neither copied
/// nor moved; use it through the reference replay is given, and keep no pointer to it.
class replay_sink {
public:
    replay_sink(mcpw_replay_sink sink, void *ctx) noexcept : sink_(sink), ctx_(ctx) {}
    replay_sink(const replay_sink &) = delete;
    replay_sink &operator=(const replay_sink &) = delete;
    replay_sink(replay_sink &&) = delete;
    replay_sink &operator=(replay_sink &&) = delete;
    void operator()(std::string_view bytes) const {
        sink_(ctx_, reinterpret_cast<const std::uint8_t *>(bytes.data()), bytes.size());
    }

private:
    mcpw_replay_sink sink_;
    void *ctx_;
};

/// A resumable-event store of your own (shared by several server processes, say), for
/// http_server_options::events; the guarantees it owes are mcpw_event_store's. The server
/// calls it during its own calls only, and its methods must not call back into the server.
/// An exception cannot cross the C ABI, so none leaves them: one from replay counts as a
/// failed read (the client gets 503 and comes back); one from append or forget is caught
/// (the event is not stored: a resumption misses it) and kept for
/// http_server::take_store_error.
class event_store {
public:
    virtual ~event_store() = default;
    /// Stores one SSE event (its bytes, `id:` line included) numbered `event`.
    virtual void append(std::string_view session, std::uint64_t stream, std::uint64_t event,
                        std::string_view bytes) = 0;
    /// Hands `sink` every stored event of `session`'s `stream` numbered above `after`, in
    /// order, before returning true. Returns false when the store could not be read (it
    /// timed out, or cannot be reached): the client then gets 503 with Retry-After and comes
    /// back, where an empty replay would end its resumed stream without the answer stored.
    virtual bool replay(std::string_view session, std::uint64_t stream, std::uint64_t after,
                        const replay_sink &sink) = 0;
    /// Drops everything stored for `session` (it ended, expired or was evicted).
    virtual void forget(std::string_view session) = 0;
};

/// Settings for http_server (mcpw_http_server_options); zero means the default.
struct http_server_options {
    /// Required: fills the buffer from a cryptographically secure source (getrandom(2), say);
    /// session ids are drawn from it. Must not throw, nor call the server (the C library
    /// refuses that call, and the refusal thrown here ends the program).
    std::function<void(std::uint8_t *, std::size_t)> random;
    /// The MCP endpoint's path ("/mcp"); another path gets 404. nullopt: not checked.
    std::optional<std::string> endpoint;
    /// Host names accepted besides loopback in Host and Origin (anything else gets 403).
    std::vector<std::string> allowed_hosts;
    std::chrono::milliseconds session_idle_timeout{0}; // 0: 10 minutes
    std::size_t max_sessions = 0;                      // 0: 1024
    std::size_t max_body = 0;                          // 0: 4 MiB; 413 beyond
    std::size_t events_kept = 0;    // per session in the built-in store; 0: 256
    /// Bytes of events per session in the built-in store, and of messages waiting for a
    /// session's GET stream (the oldest go); 0: 4 MiB.
    std::size_t events_bytes = 0;
    std::chrono::milliseconds retry{0}; // the SSE `retry` sent to 2025-11-25 clients; 0: 1 s
    /// How often a quiet SSE stream gets a keep-alive comment (it is woken with it to write);
    /// 0: 15 s; std::chrono::milliseconds::max(): never.
    std::chrono::milliseconds keepalive{0};
    /// The server's tools (a tools/list result or its `tools` array), so 2026-07-28 tools/call
    /// requests are checked against their x-mcp-header annotations.
    std::optional<std::string> tools;
    /// Your own event store, or nullptr for the built-in one. Not owned: it must outlive the
    /// server.
    event_store *events = nullptr;
};

namespace detail {

/// What an http_server keeps at a fixed address for its C callbacks.
struct http_server_hooks {
    std::function<void(std::uint8_t *, std::size_t)> random;
    event_store *events = nullptr;
    /// The first exception the store's append or forget threw, not yet taken.
    std::exception_ptr store_error = nullptr;

    void keep_error() noexcept {
        if (!store_error) store_error = std::current_exception();
    }

    static void fill(void *user, std::uint8_t *buf, std::size_t len) noexcept {
        static_cast<http_server_hooks *>(user)->random(buf, len);
    }
    static void append(void *user, const char *session, std::size_t session_len,
                       std::uint64_t stream, std::uint64_t event, const std::uint8_t *bytes,
                       std::size_t len) noexcept {
        auto *hooks = static_cast<http_server_hooks *>(user);
        try {
            hooks->events->append(std::string_view(session, session_len), stream, event,
                                  std::string_view(reinterpret_cast<const char *>(bytes), len));
        } catch (...) {
            hooks->keep_error();
        }
    }
    static int replay(void *user, const char *session, std::size_t session_len,
                      std::uint64_t stream, std::uint64_t after, mcpw_replay_sink sink,
                      void *sink_ctx) noexcept {
        try {
            bool read = static_cast<http_server_hooks *>(user)->events->replay(
                std::string_view(session, session_len), stream, after,
                replay_sink(sink, sink_ctx));
            return read ? 0 : 1;
        } catch (...) {
            return 1; // (the server drops what the sink took: nothing half-replayed goes out)
        }
    }
    static void forget(void *user, const char *session, std::size_t session_len) noexcept {
        auto *hooks = static_cast<http_server_hooks *>(user);
        try {
            hooks->events->forget(std::string_view(session, session_len));
        } catch (...) {
            hooks->keep_error();
        }
    }
};

} // namespace detail

/// The server side of Streamable HTTP (mcpw_http_server): handshake-era sessions and
/// 2026-07-28 stateless requests behind one endpoint. For each HTTP request: handle_request;
/// if it has a stream, drain poll_event and answer what you can, then settle; send the
/// response; drain poll_stream / consume_stream while the stream is open. Move-only.
class http_server {
public:
    http_server(const config &cfg, http_server_options options)
        : hooks_(new detail::http_server_hooks{std::move(options.random), options.events}) {
        mcpw_http_server_options o{};
        std::vector<mcpw_str> hosts;
        for (const std::string &h : options.allowed_hosts) {
            hosts.push_back(mcpw_str{h.data(), h.size()});
        }
        mcpw_event_store store{};
        if (hooks_->random) {
            o.random = &detail::http_server_hooks::fill;
            o.random_user = hooks_.get();
        }
        if (options.endpoint) {
            o.endpoint = mcpw_str{options.endpoint->data(), options.endpoint->size()};
        }
        o.allowed_hosts = hosts.empty() ? nullptr : hosts.data();
        o.allowed_hosts_len = hosts.size();
        o.session_idle_timeout_ms = detail::millis(options.session_idle_timeout);
        o.max_sessions = options.max_sessions;
        o.max_body = options.max_body;
        o.event_store = options.events_kept;
        o.event_store_bytes = options.events_bytes;
        o.retry_ms = detail::millis(options.retry);
        o.keepalive_ms = options.keepalive == std::chrono::milliseconds::max()
                             ? UINT64_MAX
                             : detail::millis(options.keepalive);
        if (options.tools) o.tools = mcpw_str{options.tools->data(), options.tools->size()};
        if (options.events != nullptr) {
            store.user = hooks_.get();
            store.append = &detail::http_server_hooks::append;
            store.replay = &detail::http_server_hooks::replay;
            store.forget = &detail::http_server_hooks::forget;
            o.events = &store;
        }
        mcpw_http_server *raw = nullptr;
        mcpw_result rc = mcpw_http_server_new(cfg.get(), &o, &raw);
        if (rc == MCPW_ERR_CONFIG_REFUSED && options.tools) detail::refused(rc, *options.tools);
        detail::check(rc);
        handle_.reset(raw);
    }
    http_server(http_server &&) noexcept = default;
    /// Frees the server this one held before the hooks it calls into.
    http_server &operator=(http_server &&other) noexcept {
        if (this != &other) {
            handle_ = std::move(other.handle_);
            hooks_ = std::move(other.hooks_);
        }
        return *this;
    }

    /// The first exception that the event store's append or forget threw since the last call
    /// (caught: none may cross the C ABI), or nullptr. Rethrow it (std::rethrow_exception) or
    /// log it: the event it concerned was not stored, or the session's events not dropped.
    std::exception_ptr take_store_error() noexcept {
        return hooks_ ? std::exchange(hooks_->store_error, nullptr) : nullptr;
    }

    /// One HTTP request to the endpoint: `path` nullopt is not checked (a query is ignored).
    /// No argument may be a view this server lent (copy a session id into a std::string
    /// first): they are read in place while it changes.
    http_response handle_request(std::uint64_t now_ns, std::string_view method,
                                 std::optional<std::string_view> path, http_headers headers,
                                 std::string_view body) {
        mcpw_http_response r;
        detail::check(mcpw_http_server_handle_request(
            get(), now_ns, method.data(), method.size(), detail::ptr_or_null(path),
            detail::len_or_zero(path), headers.data(), headers.size(),
            reinterpret_cast<const std::uint8_t *>(body.data()), body.size(), &r));
        return http_response(r);
    }
    /// handle_request with the headers as a braced list.
    http_response handle_request(std::uint64_t now_ns, std::string_view method,
                                 std::optional<std::string_view> path,
                                 std::initializer_list<mcpw_http_header> headers,
                                 std::string_view body) {
        return handle_request(now_ns, method, path, http_headers(headers.begin(), headers.size()),
                              body);
    }
    /// handle_request with the headers in a vector (a temporary one too: it lives for the call).
    http_response handle_request(std::uint64_t now_ns, std::string_view method,
                                 std::optional<std::string_view> path,
                                 const std::vector<mcpw_http_header> &headers,
                                 std::string_view body) {
        return handle_request(now_ns, method, path, http_headers(headers.data(), headers.size()),
                              body);
    }
    /// The final form of the stream response just returned for `stream` (a JSON body when
    /// the whole answer is there). Once per stream response, before the next request.
    http_response settle(std::uint64_t stream) {
        mcpw_http_response r;
        detail::check(mcpw_http_server_settle(get(), stream, &r));
        return http_response(r);
    }
    stream_chunk poll_stream(std::uint64_t stream) {
        stream_chunk c;
        detail::check(
            mcpw_http_server_poll_stream(get(), stream, &c.data, &c.size, &c.finished, &c.open));
        return c;
    }
    void consume_stream(std::uint64_t stream, std::size_t n) {
        detail::check(mcpw_http_server_consume_stream(get(), stream, n));
    }
    /// The next stream whose output may have changed since it was last named, or nullopt
    /// (mcpw_http_server_poll_woken). In a host that suspends one response per SSE stream,
    /// drain it after every call into the server and resume just those streams, instead of
    /// polling every open stream after every request.
    std::optional<std::uint64_t> poll_woken() {
        bool has = false;
        std::uint64_t stream = 0;
        detail::check(mcpw_http_server_poll_woken(get(), &has, &stream));
        if (!has) return std::nullopt;
        return stream;
    }
    /// The client went away from `stream` (2026-07-28: that cancels its request).
    void stream_closed(std::uint64_t now_ns, std::uint64_t stream) {
        detail::check(mcpw_http_server_stream_closed(get(), now_ns, stream));
    }
    /// Shutdown grace over: every request awaited on a stream gets an error answer there
    /// (poll_woken names the streams; write them, then end them). How many were answered.
    std::size_t abandon_streams() {
        std::size_t answered = 0;
        detail::check(mcpw_http_server_abandon_streams(get(), &answered));
        return answered;
    }
    void handle_timeout(std::uint64_t now_ns) {
        detail::check(mcpw_http_server_handle_timeout(get(), now_ns));
    }
    std::optional<std::uint64_t> poll_timeout() const {
        bool has = false;
        std::uint64_t deadline = 0;
        detail::check(mcpw_http_server_poll_timeout(get(), &has, &deadline));
        if (!has) return std::nullopt;
        return deadline;
    }
    /// The next event of any connection, or nullopt.
    std::optional<server_event> poll_event() {
        mcpw_event raw;
        std::uint64_t key = 0;
        mcpw_conn *conn = nullptr;
        detail::check(mcpw_http_server_poll_event(get(), &raw, &key, &conn));
        if (raw.kind == MCPW_EVENT_NONE) return std::nullopt;
        return server_event{event(raw), key, connection_view(conn)};
    }
    /// A view of connection `key`, to answer later or send it something of your own.
    connection_view conn(std::uint64_t key) {
        mcpw_conn *raw = nullptr;
        detail::check(mcpw_http_server_conn(get(), key, &raw));
        return connection_view(raw);
    }
    /// The session id of connection `key`; nullopt for a stateless request.
    std::optional<std::string_view> session_id(std::uint64_t key) const {
        mcpw_str s;
        detail::check(mcpw_http_server_session_id(get(), key, &s));
        return detail::optional_view(s);
    }
    struct counts_t {
        std::size_t sessions;
        std::size_t streams;
    };
    counts_t counts() const {
        counts_t c{0, 0};
        detail::check(mcpw_http_server_counts(get(), &c.sessions, &c.streams));
        return c;
    }
    /// 2025-11-25: closes the stream carrying request `id` before its answer (the client
    /// resumes with Last-Event-ID); false when that cannot be done.
    bool close_stream_for_polling(std::uint64_t key, const mcpw_id &id) {
        bool closed = false;
        detail::check(mcpw_http_server_close_stream_for_polling(get(), key, &id, &closed));
        return closed;
    }
    /// Ends every stream that only waits for server messages, before a graceful shutdown:
    /// each 2026-07-28 subscriptions/listen request gets its result, and each handshake-era
    /// session's GET stream finishes once drained; how many.
    std::size_t end_listen_streams() {
        std::size_t n = 0;
        detail::check(mcpw_http_server_end_listen_streams(get(), &n));
        return n;
    }
    /// Declares the server's tools anew while it runs (a tools/list result or its tools
    /// array), when they change and before notifications/tools/list_changed goes out, so that
    /// 2026-07-28 tools/call requests are checked against their annotations as they now are
    /// (mcpw_http_server_declare_tools). Throws MCPW_ERR_CONFIG_REFUSED when a tool's
    /// x-mcp-header annotations are invalid (the others are declared all the same); its
    /// what() then names each refused tool and why (as tools_refusals gives them).
    void declare_tools(std::string_view tools) {
        mcpw_result rc = mcpw_http_server_declare_tools(get(), tools.data(), tools.size());
        if (rc == MCPW_ERR_CONFIG_REFUSED) detail::refused(rc, tools);
        detail::check(rc);
    }

    mcpw_http_server *get() const noexcept { return handle_.get(); }

private:
    // Declared first, destroyed last: the server calls into it until it is freed.
    std::unique_ptr<detail::http_server_hooks> hooks_;
    handle<mcpw_http_server, mcpw_http_server_free> handle_;
};

/// What http_client::poll_action asks for (mcpw_http_action): make a request, or abandon one.
class http_action {
public:
    explicit http_action(const mcpw_http_action &raw) noexcept : raw_(raw) {}

    mcpw_http_action_kind kind() const noexcept { return raw_.kind; }
    bool is_send() const noexcept { return raw_.kind == MCPW_HTTP_ACTION_SEND; }
    bool is_abort() const noexcept { return raw_.kind == MCPW_HTTP_ACTION_ABORT; }
    /// Report the outcome for this exchange.
    std::uint64_t exchange() const noexcept { return raw_.exchange; }
    std::string_view method() const noexcept { return detail::view(raw_.method); }
    http_headers headers() const noexcept { return http_headers(raw_.headers, raw_.headers_len); }
    std::string_view body() const noexcept {
        return raw_.body != nullptr
                   ? std::string_view(reinterpret_cast<const char *>(raw_.body), raw_.body_len)
                   : std::string_view();
    }
    const mcpw_http_action &raw() const noexcept { return raw_; }

private:
    mcpw_http_action raw_;
};

/// Settings for http_client (mcpw_http_client_options); zero means the default.
struct http_client_options {
    std::chrono::milliseconds initial_delay{0}; // before resuming a broken stream; 0: 500 ms
    std::chrono::milliseconds max_delay{0};     // 0: 30 s
    std::uint32_t max_attempts = 0;             // resumptions per stream; 0: 5
    bool open_get_stream = false; // the session's GET stream, for messages of no request
};

/// An MCP client over Streamable HTTP (mcpw_http_client). After every input, command and
/// timer: make the requests poll_action asks for, report what comes back (handle_response,
/// handle_body, handle_end or handle_error), drain poll_event, re-arm at poll_timeout.
/// Commands go through conn(). Move-only.
class http_client {
public:
    http_client(const config &cfg, std::uint64_t now_ns,
                const http_client_options &options = http_client_options()) {
        mcpw_http_client_options o{};
        o.initial_delay_ms = detail::millis(options.initial_delay);
        o.max_delay_ms = detail::millis(options.max_delay);
        o.max_attempts = options.max_attempts;
        o.open_get_stream = options.open_get_stream;
        mcpw_http_client *raw = nullptr;
        detail::check(mcpw_http_client_new(cfg.get(), now_ns, &o, &raw));
        handle_.reset(raw);
    }

    /// The next request to make (or response to abandon), or nullopt.
    std::optional<http_action> poll_action() {
        mcpw_http_action raw;
        detail::check(mcpw_http_client_poll_action(get(), &raw));
        if (raw.kind == MCPW_HTTP_ACTION_NONE) return std::nullopt;
        return http_action(raw);
    }
    /// A response's status and headers. As for every transport input, no view this client
    /// lent (read in place while it changes).
    void handle_response(std::uint64_t now_ns, std::uint64_t exchange, std::uint16_t status,
                         http_headers headers) {
        detail::check(mcpw_http_client_handle_response(get(), now_ns, exchange, status,
                                                       headers.data(), headers.size()));
    }
    /// handle_response with the headers as a braced list.
    void handle_response(std::uint64_t now_ns, std::uint64_t exchange, std::uint16_t status,
                         std::initializer_list<mcpw_http_header> headers) {
        handle_response(now_ns, exchange, status, http_headers(headers.begin(), headers.size()));
    }
    /// handle_response with the headers in a vector (a temporary one too: it lives for the
    /// call).
    void handle_response(std::uint64_t now_ns, std::uint64_t exchange, std::uint16_t status,
                         const std::vector<mcpw_http_header> &headers) {
        handle_response(now_ns, exchange, status, http_headers(headers.data(), headers.size()));
    }
    /// Body bytes as they arrive; not a view this client lent.
    void handle_body(std::uint64_t now_ns, std::uint64_t exchange, std::string_view bytes) {
        detail::check(mcpw_http_client_handle_body(
            get(), now_ns, exchange, reinterpret_cast<const std::uint8_t *>(bytes.data()),
            bytes.size()));
    }
    /// The body ended; `jitter` (any random number) spreads resumptions out.
    void handle_end(std::uint64_t now_ns, std::uint64_t exchange, std::uint32_t jitter = 0) {
        detail::check(mcpw_http_client_handle_end(get(), now_ns, exchange, jitter));
    }
    /// The exchange failed (no connection, or it broke).
    void handle_error(std::uint64_t now_ns, std::uint64_t exchange, std::uint32_t jitter = 0) {
        detail::check(mcpw_http_client_handle_error(get(), now_ns, exchange, jitter));
    }
    std::optional<event> poll_event() {
        mcpw_event raw;
        detail::check(mcpw_http_client_poll_event(get(), &raw));
        if (raw.kind == MCPW_EVENT_NONE) return std::nullopt;
        return event(raw);
    }
    /// A view of the client's connection, for requests and the getters.
    connection_view conn() {
        mcpw_conn *raw = nullptr;
        detail::check(mcpw_http_client_conn(get(), &raw));
        return connection_view(raw);
    }
    std::optional<std::uint64_t> poll_timeout() const {
        bool has = false;
        std::uint64_t deadline = 0;
        detail::check(mcpw_http_client_poll_timeout(get(), &has, &deadline));
        if (!has) return std::nullopt;
        return deadline;
    }
    void handle_timeout(std::uint64_t now_ns) {
        detail::check(mcpw_http_client_handle_timeout(get(), now_ns));
    }
    /// The handshake-era session id, once the server gave one.
    std::optional<std::string_view> session_id() const {
        mcpw_str s;
        detail::check(mcpw_http_client_session_id(get(), &s));
        return detail::optional_view(s);
    }
    /// The start of the last error page that held no JSON-RPC answer (a proxy's HTML, say),
    /// to show next to a failure's HTTP status; nullopt when none came.
    std::optional<std::string_view> failure_text() const {
        mcpw_str s;
        detail::check(mcpw_http_client_failure_text(get(), &s));
        return detail::optional_view(s);
    }
    /// Queues a DELETE of the session; false without one, and while initialize has no
    /// answer yet (the DELETE is then owed: is_ending_session holds until it is done).
    bool end_session() {
        bool queued = false;
        detail::check(mcpw_http_client_end_session(get(), &queued));
        return queued;
    }
    /// Whether a notification or answer (a close's cancellation, say) has not reached the
    /// server yet: no response head, or not yet sent. Before exiting, keep driving the client
    /// (timers included) while this holds, within a bound of your own: a server without
    /// sessions gets no DELETE that would wait for it.
    bool has_unheard() const {
        bool unheard = false;
        detail::check(mcpw_http_client_has_unheard(get(), &unheard));
        return unheard;
    }
    /// Whether the session's DELETE (end_session) is still to go out (owed to the session an
    /// unanswered initialize is about to make, held back or queued) or under way; false
    /// once it ended or was given up, and when the session turned out to be gone before it
    /// went out (it is then never sent). Keep driving the client while this holds.
    bool is_ending_session() const {
        bool ending = false;
        detail::check(mcpw_http_client_is_ending_session(get(), &ending));
        return ending;
    }

    mcpw_http_client *get() const noexcept { return handle_.get(); }

private:
    handle<mcpw_http_client, mcpw_http_client_free> handle_;
};

// ---- JSON helpers ---------------------------------------------------------------------------

/// Member `key` of the JSON object `json`, as a view into `json`; nullopt when absent.
inline std::optional<std::string_view> json_get(std::string_view json, std::string_view key) {
    mcpw_str out;
    detail::check(mcpw_json_get(json.data(), json.size(), key.data(), key.size(), &out));
    return detail::optional_view(out);
}

/// Not for a temporary string: the view would outlive its text.
template <class S, detail::if_temporary_string<S> = 0>
std::optional<std::string_view> json_get(S &&json, std::string_view key) = delete;

/// Members `keys...` of the JSON object `json` in one pass, in the order asked, as views into
/// `json` (nullopt for an absent one). Use it instead of several json_get calls on the same
/// object: the text is validated and read once.
template <typename... Keys>
inline std::array<std::optional<std::string_view>, sizeof...(Keys)> json_get_each(
    std::string_view json, Keys... keys) {
    static_assert(sizeof...(Keys) >= 1 && sizeof...(Keys) <= 64, "1 to 64 keys");
    std::array<std::string_view, sizeof...(Keys)> views{std::string_view(keys)...};
    std::array<mcpw_str, sizeof...(Keys)> in{}, out{};
    for (std::size_t i = 0; i < views.size(); ++i) in[i] = {views[i].data(), views[i].size()};
    detail::check(mcpw_json_get_each(json.data(), json.size(), in.data(), in.size(), out.data()));
    std::array<std::optional<std::string_view>, sizeof...(Keys)> found;
    for (std::size_t i = 0; i < out.size(); ++i) found[i] = detail::optional_view(out[i]);
    return found;
}

/// Not for a temporary string: the views would outlive its text.
template <class S, typename... Keys, detail::if_temporary_string<S> = 0>
void json_get_each(S &&json, Keys... keys) = delete;

/// Element `index` of the JSON array `json`, as a view into `json`; nullopt past the end.
inline std::optional<std::string_view> json_at(std::string_view json, std::size_t index) {
    mcpw_str out;
    detail::check(mcpw_json_at(json.data(), json.size(), index, &out));
    return detail::optional_view(out);
}

/// Not for a temporary string: the view would outlive its text.
template <class S, detail::if_temporary_string<S> = 0>
std::optional<std::string_view> json_at(S &&json, std::size_t index) = delete;

/// The text of the JSON string `json` (quotes included, as json_get finds it), escapes
/// decoded, as UTF-8: use it where the text itself matters (a path, a name to compare); the
/// raw view is already JSON to copy into an answer. Throws MCPW_ERR_JSON_WRONG_TYPE when
/// `json` is no string. The text may hold NUL characters (a `\u0000` escape).
inline std::string json_string(std::string_view json) {
    // Decoding never lengthens: an escape is at least as long as what it stands for.
    std::string text(json.size(), '\0');
    std::size_t len = 0;
    detail::check(mcpw_json_string(json.data(), json.size(), text.data(), text.size(), &len));
    text.resize(len);
    return text;
}

/// Which tools of `tools` (a tools/list result or its tools array) an HTTP server would
/// refuse, and why, as a JSON array of {"name", "reason"} objects; "[]" when it would take
/// them all (mcpw_tools_refusals). Use it to check tools before declaring them; http_server's
/// constructor and declare_tools already put it in the error they throw. Throws
/// MCPW_ERR_INVALID_JSON or MCPW_ERR_JSON_WRONG_TYPE for what is no tools list.
inline std::string tools_refusals(std::string_view tools) {
    std::string text;
    detail::check(detail::tools_refusals(tools, text));
    return text;
}

/// The JSON number `json` as the nearest double, whatever the C locale: use it for numeric
/// arguments instead of std::stod. Throws MCPW_ERR_JSON_WRONG_TYPE when `json` is no number
/// or lies beyond a double's range.
inline double json_number(std::string_view json) {
    double value = 0;
    detail::check(mcpw_json_number(json.data(), json.size(), &value));
    return value;
}

/// Every element of the JSON array `json`, as views into `json`, read in one pass: use it to
/// walk an array (json_at reads the whole text again for each index).
inline std::vector<std::string_view> json_items(std::string_view json) {
    std::array<mcpw_str, 16> room;
    std::size_t count = 0;
    detail::check(mcpw_json_items(json.data(), json.size(), room.data(), room.size(), &count));
    std::vector<mcpw_str> all;
    const mcpw_str *items = room.data();
    if (count > room.size()) {
        all.resize(count);
        detail::check(mcpw_json_items(json.data(), json.size(), all.data(), all.size(), &count));
        items = all.data();
    }
    std::vector<std::string_view> views;
    views.reserve(count);
    for (std::size_t i = 0; i < count; ++i) views.emplace_back(items[i].ptr, items[i].len);
    return views;
}

/// Not for a temporary string: the views would outlive its text.
template <class S, detail::if_temporary_string<S> = 0>
std::vector<std::string_view> json_items(S &&json) = delete;

// ---- Decoding without a connection ----------------------------------------------------------

/// One message of a decoded frame (see mcpw_message in mcpwire.h): its views point into the
/// frame given to decode(). method() and error_message() are wire text; *_escaped() says
/// whether they still hold JSON escapes.
class message {
public:
    explicit message(const mcpw_message &raw) noexcept : raw_(raw) {}

    /// An mcpw_message_kind value; a plain integer, as in the C struct, so that a kind a newer
    /// library adds is a number to ignore, not an enum value out of range.
    std::uint32_t kind() const noexcept { return raw_.kind; }
    const mcpw_message &raw() const noexcept { return raw_; }

    const mcpw_id &id() const noexcept { return raw_.id; }
    std::string_view method() const noexcept { return detail::view(raw_.method); }
    bool method_escaped() const noexcept { return raw_.method_escaped; }
    std::optional<std::string_view> params() const { return detail::optional_view(raw_.params); }
    std::string_view result() const noexcept { return detail::view(raw_.result); }
    /// The error code of an error response, or the code to answer a refusal with.
    std::int64_t code() const noexcept { return raw_.code; }
    std::string_view error_message() const noexcept { return detail::view(raw_.message); }
    bool error_message_escaped() const noexcept { return raw_.message_escaped; }
    std::optional<std::string_view> data() const { return detail::optional_view(raw_.data); }
    mcpw_decode_reason reason() const noexcept { return raw_.reason; }
    std::size_t offset() const noexcept { return raw_.offset; }

private:
    mcpw_message raw_;
};

/// What decode() found in one frame.
struct decoded {
    std::vector<message> messages;
    bool batch = false;
};

/// One frame (a stdio line, an HTTP body) checked by the engine's JSON-RPC rules with no
/// connection: for a router or a proxy. A refused frame is one message of kind
/// MCPW_MESSAGE_PARSE_ERROR, MCPW_MESSAGE_INVALID, MCPW_MESSAGE_INVALID_RESPONSE or
/// MCPW_MESSAGE_INVALID_NOTIFICATION (never answer those two), not an exception. Keep `frame` alive
/// and unchanged while the messages are used.
inline decoded decode(std::string_view frame) {
    const auto *bytes = reinterpret_cast<const std::uint8_t *>(frame.data());
    mcpw_message one{};
    std::size_t count = 0;
    bool batch = false;
    detail::check(mcpw_decode(bytes, frame.size(), &one, 1, &count, &batch));
    decoded d;
    d.batch = batch;
    if (count <= 1) {
        d.messages.emplace_back(one);
        return d;
    }
    std::vector<mcpw_message> all(count);
    detail::check(mcpw_decode(bytes, frame.size(), all.data(), all.size(), &count, &batch));
    d.messages.reserve(count);
    for (const auto &m : all) d.messages.emplace_back(m);
    return d;
}

/// Not for a temporary string: the messages' views would outlive its text.
template <class S, detail::if_temporary_string<S> = 0>
decoded decode(S &&frame) = delete;

/// The version of the linked library (compare with MCPWIRE_VERSION).
inline std::string_view library_version() { return mcpw_version(); }

} // namespace mcpw

#endif // MCPWIRE_HPP
