// mcpwire.hpp: a header-only C++17 RAII wrapper over the mcpwire C ABI (include/mcpwire.h).
//
// Handles are move-only owners (`mcpw::config`, `mcpw::connection`): the destructor frees,
// a moved-from handle is empty, and nothing is ever freed twice. Everything else is a thin,
// inline translation: std::string_view for pointer + length, std::optional for "absent".
//
// Errors are exceptions (`mcpw::error`, carrying the mcpw_result code). Why not an
// expected-style result: a constructor can only report failure by throwing, and every error
// the C ABI returns is either misuse (a NULL or malformed argument: a bug in the caller) or a
// command the engine refused while leaving the connection unchanged. Both are rare, neither
// belongs on the hot path (poll_event, transmit, consume and handle_input fail only on
// misuse), so exceptions keep the common code straight-line at no cost, and C++17 has no
// std::expected to build on. Where a refusal is routine for you, call the C function on
// `get()` and look at its code.
//
// Lifetimes are the C ABI's: every string_view an event or getter returns points into the
// connection and stays valid until the next non-const call on it. Keep an id beyond that with
// `mcpw::owned_id`.
#ifndef MCPWIRE_HPP
#define MCPWIRE_HPP

#include "mcpwire.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mcpw {

// ---- Errors --------------------------------------------------------------------------------

/// A call the C ABI refused; `code()` says why.
class error : public std::runtime_error {
public:
    explicit error(mcpw_result code)
        : std::runtime_error(mcpw_result_message(static_cast<int>(code))), code_(code) {}
    mcpw_result code() const noexcept { return code_; }

private:
    mcpw_result code_;
};

namespace detail {

inline void check(mcpw_result rc) {
    if (rc != MCPW_OK) throw error(rc);
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
    explicit owned_id(const mcpw_id &id)
        : kind_(id.kind), integer_(id.integer),
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
        return a.kind_ == b.kind_ && a.integer_ == b.integer_ && a.text_ == b.text_;
    }
    friend bool operator!=(const owned_id &a, const owned_id &b) noexcept { return !(a == b); }

private:
    std::uint32_t kind_;
    std::int64_t integer_;
    std::string text_;
};

// ---- Events ---------------------------------------------------------------------------------

/// One event (see mcpw_event in mcpwire.h). Its views live until the next non-const call on
/// the connection that produced it.
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

    config &versions(std::initializer_list<std::string_view> list) {
        std::vector<mcpw_str> strs;
        strs.reserve(list.size());
        for (std::string_view v : list) strs.push_back(mcpw_str{v.data(), v.size()});
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
            mcpw_config_set_discover_timeout(get(), static_cast<std::uint64_t>(timeout.count())));
        return *this;
    }
    config &discover_cache(std::chrono::milliseconds ttl, mcpw_cache_scope scope) {
        detail::check(mcpw_config_set_discover_cache(get(), static_cast<std::uint64_t>(ttl.count()),
                                                     static_cast<std::uint32_t>(scope)));
        return *this;
    }
    config &timeouts(std::chrono::milliseconds request, std::chrono::milliseconds max_total) {
        detail::check(mcpw_config_set_timeouts(get(), static_cast<std::uint64_t>(request.count()),
                                               static_cast<std::uint64_t>(max_total.count())));
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

/// One MCP connection (mcpw_conn). Drain poll_event, then transmit/consume, then poll_timeout
/// after every input or command.
class connection {
public:
    connection(const config &cfg, std::uint64_t now_ns) {
        mcpw_conn *raw = nullptr;
        detail::check(mcpw_conn_new(cfg.get(), now_ns, &raw));
        handle_.reset(raw);
    }

    // -- inputs --
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
    void cancel(std::uint64_t now_ns, std::int64_t request,
                std::optional<std::string_view> reason = std::nullopt) {
        detail::check(mcpw_conn_cancel(get(), now_ns, request, detail::ptr_or_null(reason),
                                       detail::len_or_zero(reason)));
    }
    void close(std::uint64_t now_ns, std::chrono::milliseconds grace) {
        detail::check(mcpw_conn_close(get(), now_ns, static_cast<std::uint64_t>(grace.count())));
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
    /// (ours, the peer's) requests awaiting an answer.
    std::pair<std::size_t, std::size_t> in_flight() const {
        std::size_t ours = 0, peers = 0;
        detail::check(mcpw_conn_in_flight(get(), &ours, &peers));
        return {ours, peers};
    }

    mcpw_conn *get() const noexcept { return handle_.get(); }

private:
    handle<mcpw_conn, mcpw_conn_free> handle_;
};

// ---- JSON helpers ---------------------------------------------------------------------------

/// Member `key` of the JSON object `json`, as a view into `json`; nullopt when absent.
inline std::optional<std::string_view> json_get(std::string_view json, std::string_view key) {
    mcpw_str out;
    detail::check(mcpw_json_get(json.data(), json.size(), key.data(), key.size(), &out));
    return detail::optional_view(out);
}

/// Element `index` of the JSON array `json`, as a view into `json`; nullopt past the end.
inline std::optional<std::string_view> json_at(std::string_view json, std::size_t index) {
    mcpw_str out;
    detail::check(mcpw_json_at(json.data(), json.size(), index, &out));
    return detail::optional_view(out);
}

/// The version of the linked library (compare with MCPWIRE_VERSION).
inline std::string_view library_version() { return mcpw_version(); }

} // namespace mcpw

#endif // MCPWIRE_HPP
