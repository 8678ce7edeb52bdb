// hub_http.cpp - HTTP through libcurl (hub_http.hpp), opened at the first request.
#include "hub/hub_http.hpp"

#include <cctype>
#include <cstdio>
#include <mutex>

#include <curl/curl.h>
#include <dlfcn.h>

#include "core/error.hpp"

namespace attnmap {

namespace {

// libcurl, opened when the first request is made: a run that names no Hub model never loads it and the
// libraries it brings (Kerberos, LDAP, SSH, RTMP, HTTP/2, IDN, PSL, brotli), so its start and its address
// space stay as they were (under ulimit -v every thread's stack needs room: tests/test_limits.cpp).
// Debian's libcurl4 (libcurl.so.4, ABI 4); the headers are libcurl4-openssl-dev's.
struct CurlApi {
  CURLcode (*global_init)(long);
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  void (*easy_cleanup)(CURL*);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
  const char* (*easy_strerror)(CURLcode);
  char* (*version)();
};

template <typename F>
void bind(void* lib, F& f, const char* name) {
  f = reinterpret_cast<F>(::dlsym(lib, name));
  if (!f) throw Error(std::string("libcurl.so.4 lacks ") + name + ": reinstall Debian's libcurl4");
}

const CurlApi& curl() {
  static std::once_flag once;
  static CurlApi api{};
  static std::string failure;
  std::call_once(once, [] {
    void* lib = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      failure = std::string("cannot load libcurl.so.4 (") + ::dlerror() + "): install Debian's libcurl4 to fetch Hub models";
      return;
    }
    try {
      bind(lib, api.global_init, "curl_global_init");
      bind(lib, api.easy_init, "curl_easy_init");
      bind(lib, api.easy_setopt, "curl_easy_setopt");
      bind(lib, api.easy_perform, "curl_easy_perform");
      bind(lib, api.easy_getinfo, "curl_easy_getinfo");
      bind(lib, api.easy_cleanup, "curl_easy_cleanup");
      bind(lib, api.slist_append, "curl_slist_append");
      bind(lib, api.slist_free_all, "curl_slist_free_all");
      bind(lib, api.easy_strerror, "curl_easy_strerror");
      bind(lib, api.version, "curl_version");
    } catch (const Error& e) {
      failure = e.what();
      return;
    }
    api.global_init(CURL_GLOBAL_DEFAULT);
  });
  if (!failure.empty()) throw Error(failure);
  return api;
}

std::string user_agent() { return std::string("attnmap/") + ATTNMAP_VERSION + "; " + curl().version(); }

// One easy handle with its header list, freed on every path.
struct Request {
  const CurlApi* api = nullptr;
  CURL* curl = nullptr;
  curl_slist* list = nullptr;
  HttpAnswer answer;
  explicit Request(const std::string& url, const HttpHeaders& headers) {
    api = &attnmap::curl();
    curl = api->easy_init();
    if (!curl) throw Error("libcurl could not start a request");
    for (const std::string& h : headers) list = api->slist_append(list, h.c_str());
    api->easy_setopt(curl, CURLOPT_URL, url.c_str());
    api->easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    api->easy_setopt(curl, CURLOPT_USERAGENT, user_agent().c_str());
    api->easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    api->easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    api->easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    api->easy_setopt(curl, CURLOPT_HEADERFUNCTION, &Request::on_header);
    api->easy_setopt(curl, CURLOPT_HEADERDATA, this);
  }
  ~Request() {
    api->slist_free_all(list);
    api->easy_cleanup(curl);
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // Each header line; a new status line (after a followed redirect) starts the headers afresh.
  static size_t on_header(char* data, size_t size, size_t n, void* self) {
    auto* r = static_cast<Request*>(self);
    std::string line(data, size * n);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (line.rfind("HTTP/", 0) == 0) {
      r->answer.headers.clear();
      return size * n;
    }
    const size_t colon = line.find(':');
    if (colon == std::string::npos) return size * n;
    std::string name = line.substr(0, colon), value = line.substr(colon + 1);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    r->answer.headers[name] = value;
    return size * n;
  }

  HttpAnswer perform() {
    const CURLcode rc = api->easy_perform(curl);
    api->easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &answer.status);
    answer.reached = rc == CURLE_OK;
    if (rc != CURLE_OK) answer.failure = api->easy_strerror(rc);
    switch (rc) {  // what may pass on a retry, as huggingface_hub retries connection errors and timeouts
      case CURLE_COULDNT_RESOLVE_PROXY: case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_CONNECT:
      case CURLE_PARTIAL_FILE: case CURLE_OPERATION_TIMEDOUT: case CURLE_SEND_ERROR: case CURLE_RECV_ERROR:
      case CURLE_GOT_NOTHING: case CURLE_SSL_CONNECT_ERROR: case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
        answer.transient = true;
        break;
      default:
        break;
    }
    return std::move(answer);
  }
};

struct SmallBody {
  std::string* out;
  size_t max;
};

size_t on_small_body(char* data, size_t size, size_t n, void* p) {
  auto* b = static_cast<SmallBody*>(p);
  if (b->out->size() + size * n > b->max) return 0;  // too large: stop (a failure)
  b->out->append(data, size * n);
  return size * n;
}

struct Stream {
  const HttpSink* sink;
  Request* req;
  int64_t offset;
  bool checked = false, ok_status = false;
};

size_t on_stream(char* data, size_t size, size_t n, void* p) {
  auto* s = static_cast<Stream*>(p);
  if (!s->checked) {  // the first body bytes: is this the file (200 / 206), or an error page?
    s->checked = true;
    long status = 0;
    s->req->api->easy_getinfo(s->req->curl, CURLINFO_RESPONSE_CODE, &status);
    s->ok_status = status == 200 || status == 206;
    if (status == 200 && s->offset > 0 && !s->sink->restart()) return 0;
  }
  if (!s->ok_status) return size * n;  // an error answer's body is not the file: dropped
  if (!s->sink->write(data, size * n)) return 0;
  s->req->answer.received += static_cast<int64_t>(size * n);
  return size * n;
}

// libcurl's progress call, made as bytes move and about once a second while none do: non-zero aborts.
int on_progress(void* p, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* s = static_cast<Stream*>(p);
  return s->sink->stop && s->sink->stop() ? 1 : 0;
}

}  // namespace

HttpAnswer http_head(const std::string& url, const HttpHeaders& headers, long timeout_s) {
  Request r(url, headers);
  r.api->easy_setopt(r.curl, CURLOPT_NOBODY, 1L);
  r.api->easy_setopt(r.curl, CURLOPT_FOLLOWLOCATION, 0L);
  r.api->easy_setopt(r.curl, CURLOPT_TIMEOUT, timeout_s);
  r.api->easy_setopt(r.curl, CURLOPT_CONNECTTIMEOUT, timeout_s);
  return r.perform();
}

HttpAnswer http_get_small(const std::string& url, const HttpHeaders& headers, long timeout_s, size_t max_bytes) {
  Request r(url, headers);
  SmallBody body{&r.answer.body, max_bytes};
  r.api->easy_setopt(r.curl, CURLOPT_FOLLOWLOCATION, 1L);
  r.api->easy_setopt(r.curl, CURLOPT_MAXREDIRS, 5L);
  r.api->easy_setopt(r.curl, CURLOPT_TIMEOUT, timeout_s);
  r.api->easy_setopt(r.curl, CURLOPT_CONNECTTIMEOUT, timeout_s);
  r.api->easy_setopt(r.curl, CURLOPT_WRITEFUNCTION, &on_small_body);
  r.api->easy_setopt(r.curl, CURLOPT_WRITEDATA, &body);
  return r.perform();
}

HttpAnswer http_get_to(const std::string& url, const HttpHeaders& headers, int64_t offset, long connect_timeout_s,
                       long stall_timeout_s, const HttpSink& sink) {
  Request r(url, headers);
  Stream s{&sink, &r, offset};
  const std::string range = std::to_string(offset) + "-";
  if (offset > 0) r.api->easy_setopt(r.curl, CURLOPT_RANGE, range.c_str());
  r.api->easy_setopt(r.curl, CURLOPT_FOLLOWLOCATION, 1L);
  r.api->easy_setopt(r.curl, CURLOPT_MAXREDIRS, 5L);
  r.api->easy_setopt(r.curl, CURLOPT_CONNECTTIMEOUT, connect_timeout_s);
  r.api->easy_setopt(r.curl, CURLOPT_LOW_SPEED_LIMIT, 1L);  // no byte for stall_timeout_s seconds: stopped
  r.api->easy_setopt(r.curl, CURLOPT_LOW_SPEED_TIME, stall_timeout_s);
  r.api->easy_setopt(r.curl, CURLOPT_WRITEFUNCTION, &on_stream);
  r.api->easy_setopt(r.curl, CURLOPT_WRITEDATA, &s);
  if (sink.stop) {
    r.api->easy_setopt(r.curl, CURLOPT_NOPROGRESS, 0L);
    r.api->easy_setopt(r.curl, CURLOPT_XFERINFOFUNCTION, &on_progress);
    r.api->easy_setopt(r.curl, CURLOPT_XFERINFODATA, &s);
  }
  return r.perform();
}

std::string url_quote(const std::string& s, bool keep_slash) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string url_origin(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return {};
  const size_t end = url.find_first_of("/?#", scheme + 3);
  std::string o = url.substr(0, end == std::string::npos ? url.size() : end);
  for (char& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

}  // namespace attnmap
