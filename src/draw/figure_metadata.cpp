// figure_metadata.cpp - reading back a figure's record text (see figure_metadata.hpp).
#include "draw/figure_metadata.hpp"

#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace attnmap {

namespace {

namespace fs = std::filesystem;

// A figure file's bytes (at most 64 MB: figures are far smaller); "" when it cannot be read.
std::string figure_bytes(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(path, ec)) || fs::file_size(path, ec) > (64u << 20)) return {};
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void put_utf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// A PDF string after /Subject (PDF 1.7 sec. 7.3.4): a literal (...) with backslash escapes, or a hex <...>
// string; UTF-16BE with its byte-order mark (how cairo writes non-ASCII text) becomes UTF-8.
std::string pdf_string(const std::string& doc, size_t at) {
  std::string bytes;
  if (doc[at] == '(') {
    int depth = 1;
    for (size_t i = at + 1; i < doc.size() && depth > 0; ++i) {
      char c = doc[i];
      if (c == '\\' && i + 1 < doc.size()) {
        const char e = doc[++i];
        if (e >= '0' && e <= '7') {
          int v = e - '0';
          for (int k = 0; k < 2 && i + 1 < doc.size() && doc[i + 1] >= '0' && doc[i + 1] <= '7'; ++k) v = v * 8 + (doc[++i] - '0');
          c = static_cast<char>(v);
        } else {
          c = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
        }
      } else if (c == '(') {
        ++depth;
      } else if (c == ')' && --depth == 0) {
        break;
      }
      bytes += c;
    }
  } else {
    std::string hex;
    for (size_t i = at + 1; i < doc.size() && doc[i] != '>'; ++i)
      if (std::isxdigit(static_cast<unsigned char>(doc[i]))) hex += doc[i];
    for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  if (bytes.size() < 2 || static_cast<unsigned char>(bytes[0]) != 0xFE || static_cast<unsigned char>(bytes[1]) != 0xFF)
    return bytes;
  std::string out;
  for (size_t i = 2; i + 1 < bytes.size(); i += 2) {
    uint32_t u = (static_cast<unsigned char>(bytes[i]) << 8) | static_cast<unsigned char>(bytes[i + 1]);
    if (u >= 0xD800 && u < 0xDC00 && i + 3 < bytes.size()) {
      const uint32_t lo = (static_cast<unsigned char>(bytes[i + 2]) << 8) | static_cast<unsigned char>(bytes[i + 3]);
      u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
      i += 2;
    }
    put_utf8(&out, u);
  }
  return out;
}

bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

}  // namespace

std::optional<std::string> read_figure_metadata(const std::string& path) {
  const bool pdf = ends_with(path, ".pdf");
  if (!pdf && !ends_with(path, ".svg")) return std::nullopt;
  const std::string doc = figure_bytes(path);
  if (pdf) {
    const size_t at = doc.rfind("/Subject");
    if (at == std::string::npos) return std::nullopt;
    const size_t open = doc.find_first_of("(<", at + 8);
    if (open == std::string::npos) return std::nullopt;
    return pdf_string(doc, open);
  }
  const std::string tag = "<metadata id=\"attnmap\">";
  const size_t a = doc.find(tag), b = a == std::string::npos ? a : doc.find("</metadata>", a);
  if (b == std::string::npos) return std::nullopt;
  std::string text;
  const std::string esc = doc.substr(a + tag.size(), b - a - tag.size());
  for (size_t i = 0; i < esc.size(); ++i) {
    if (esc.compare(i, 5, "&amp;") == 0) {
      text += '&';
      i += 4;
    } else if (esc.compare(i, 4, "&lt;") == 0) {
      text += '<';
      i += 3;
    } else if (esc.compare(i, 4, "&gt;") == 0) {
      text += '>';
      i += 3;
    } else {
      text += esc[i];
    }
  }
  return text;
}

}  // namespace attnmap
