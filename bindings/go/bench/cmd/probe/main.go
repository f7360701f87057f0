// Command probe is the MCP client side of .ci/go-bench: it checks that a server at URL
// answers the echo tool correctly, and opens handshake-era sessions.
//
//	probe -url URL check          # a stateless 2026-07-28 tools/call of echo, answer checked
//	probe -url URL session        # initialize + notifications/initialized (2025-11-25), then
//	                              # a tools/call in that session, checked; prints the session id
//	probe -url URL sessions -n N  # opens N sessions (initialize + initialized each)
//
// Answers may come as application/json or as a text/event-stream; both are read. It exits
// non-zero, saying why, when anything is not as the protocol says.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mcpwire/mcpwire/bindings/go/bench"
)

var client = &http.Client{Timeout: 10 * time.Second}

// post sends one JSON-RPC message and returns the status, the session id header and the
// JSON-RPC messages of the answer (none for 202).
func post(url string, body []byte, headers map[string]string) (int, string, [][]byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "", nil, err
	}
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, session, nil, fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, data)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return resp.StatusCode, session, nil, nil
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, session, sseData(data), nil
	}
	return resp.StatusCode, session, [][]byte{data}, nil
}

// sseData returns the data of every event in an SSE body (empty events dropped).
func sseData(body []byte) [][]byte {
	var events [][]byte
	var cur []byte
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<24)
	flush := func() {
		if len(bytes.TrimSpace(cur)) > 0 {
			events = append(events, cur)
		}
		cur = nil
	}
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			flush()
		case bytes.HasPrefix(line, []byte("data:")):
			if cur != nil {
				cur = append(cur, '\n')
			}
			cur = append(cur, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
	}
	flush()
	return events
}

// answerTo picks the response to id among msgs (a stream may carry notifications first).
func answerTo(msgs [][]byte, id int) ([]byte, error) {
	for _, m := range msgs {
		var head struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(m, &head) == nil && string(head.ID) == fmt.Sprint(id) {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no answer to id %d in %q", id, msgs)
}

func check(url string) error {
	_, _, msgs, err := post(url, bench.ModernCallBody(1), map[string]string{
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"})
	if err != nil {
		return fmt.Errorf("stateless tools/call: %w", err)
	}
	answer, err := answerTo(msgs, 1)
	if err != nil {
		return fmt.Errorf("stateless tools/call: %w", err)
	}
	if err := bench.CheckEchoResponse(answer, 1); err != nil {
		return fmt.Errorf("stateless tools/call: %w", err)
	}
	return nil
}

// open runs the handshake and returns the session id.
func open(url string) (string, error) {
	_, session, msgs, err := post(url, []byte(strings.TrimSpace(bench.InitializeLine)), nil)
	if err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	if session == "" {
		return "", errors.New("initialize: no Mcp-Session-Id in the answer (no sessions)")
	}
	answer, err := answerTo(msgs, 0)
	if err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	var init struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal(answer, &init); err != nil || init.Result.ProtocolVersion != "2025-11-25" {
		return "", fmt.Errorf("initialize answered %.300s", answer)
	}
	headers := map[string]string{"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
	status, _, _, err := post(url, []byte(strings.TrimSpace(bench.InitializedLine)), headers)
	if err != nil {
		return "", fmt.Errorf("notifications/initialized: %w", err)
	}
	if status != http.StatusAccepted {
		return "", fmt.Errorf("notifications/initialized: HTTP %d, want 202", status)
	}
	return session, nil
}

func session(url string) (string, error) {
	id, err := open(url)
	if err != nil {
		return "", err
	}
	headers := map[string]string{"Mcp-Session-Id": id, "MCP-Protocol-Version": "2025-11-25"}
	_, _, msgs, err := post(url, bytes.TrimSpace(bench.CallLine(1)), headers)
	if err != nil {
		return "", fmt.Errorf("tools/call in the session: %w", err)
	}
	answer, err := answerTo(msgs, 1)
	if err != nil {
		return "", fmt.Errorf("tools/call in the session: %w", err)
	}
	if err := bench.CheckEchoResponse(answer, 1); err != nil {
		return "", fmt.Errorf("tools/call in the session: %w", err)
	}
	return id, nil
}

func main() {
	url := flag.String("url", "", "the MCP endpoint, http://HOST:PORT/mcp")
	n := flag.Int("n", 1000, "sessions: how many to open")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("probe: ")
	if flag.NArg() == 0 {
		log.Fatal("usage: probe -url URL check|session|sessions [-n N]")
	}
	command := flag.Arg(0)
	_ = flag.CommandLine.Parse(flag.Args()[1:]) // flags may follow the command too
	if *url == "" || flag.NArg() != 0 {
		log.Fatal("usage: probe -url URL check|session|sessions [-n N]")
	}
	switch command {
	case "check":
		if err := check(*url); err != nil {
			log.Fatal(err)
		}
	case "session":
		id, err := session(*url)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(id)
	case "sessions":
		for i := 0; i < *n; i++ {
			if _, err := open(*url); err != nil {
				log.Fatalf("session %d: %v", i+1, err)
			}
		}
	default:
		log.Fatalf("unknown command %q", command)
	}
	os.Exit(0)
}
