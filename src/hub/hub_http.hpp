// hub_http.hpp - the few HTTP requests the Hub needs, through libcurl (Debian's libcurl4-openssl-dev): a
// HEAD that does not follow redirects, a small GET (the API's JSON), and a GET streamed into a file from an
// offset (Range) with a progress call.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace attnmap {

/// One answer. `reached` false: no HTTP answer at all (connection refused, DNS, timeout, a cut connection);
/// `failure` then says what happened. Header names are lower-case.
struct HttpAnswer {
  bool reached = false;
  bool transient = false;  ///< not reached for a reason that may pass (connection refused, timeout, a cut)
  std::string failure;
  long status = 0;
  std::map<std::string, std::string> headers;
  std::string body;  ///< small GET only
  int64_t received = 0;  ///< streamed GET: body bytes written to the file
  /// The value of header `name` (lower-case), or "" when absent.
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

/// Request headers as "Name: value" lines.
using HttpHeaders = std::vector<std::string>;

/// HEAD `url`, redirects not followed; `timeout_s` for the whole request (connect included).
HttpAnswer http_head(const std::string& url, const HttpHeaders& headers, long timeout_s);

/// GET `url` into memory (at most `max_bytes`; more is a failure), redirects to the same host followed.
HttpAnswer http_get_small(const std::string& url, const HttpHeaders& headers, long timeout_s, size_t max_bytes);

/// Where a streamed GET's bytes go: called with each chunk; returns false to stop (a write failure: its
/// reason is the sink's to keep). `restart` is called when the server answers 200 to a Range request (the
/// file is sent whole: what was written must be dropped); returns false to stop. `stop` (may be empty) is
/// polled while the transfer runs, bytes or none (at least about once a second while none come: a stalled
/// server, a slow connect): true aborts it (reached false, not transient).
struct HttpSink {
  std::function<bool(const char* data, size_t n)> write;
  std::function<bool()> restart;
  std::function<bool()> stop;
};

/// GET `url` from byte `offset` (a Range request when offset > 0), redirects followed, streamed into `sink`.
/// `connect_timeout_s` for the connection; a transfer that receives no byte for `stall_timeout_s` seconds is
/// stopped (reached false). The body is streamed only for a 200 / 206 answer.
HttpAnswer http_get_to(const std::string& url, const HttpHeaders& headers, int64_t offset, long connect_timeout_s,
                       long stall_timeout_s, const HttpSink& sink);

/// `s` percent-encoded for a URL path: unreserved characters kept, '/' kept only when `keep_slash`
/// (huggingface_hub quotes a revision with safe="" and a file name with safe="/").
std::string url_quote(const std::string& s, bool keep_slash);

/// "scheme://host[:port]" of a URL, lower-cased host, for telling a redirect to another server.
std::string url_origin(const std::string& url);

}  // namespace attnmap
