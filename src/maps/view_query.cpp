// view_query.cpp - token queries of views (issue 27): which row or column of attention a view reads
// (`:q=r7c3`, `:q=x120y85`, `:q=cls|dist|reg<k>`, `:k=r7c3`, `:received`), parsed, resolved against the
// model, placed on a photo and described in words. See views.hpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "maps/views.hpp"
#include "maps/views_internal.hpp"

namespace attnmap {
namespace view_detail {

// 0.1 -> "0.1" (shortest %g form)
std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

bool parse_int(const std::string& s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  size_t i = (s[0] == '-') ? 1 : 0;
  if (i == s.size()) return false;
  for (size_t k = i; k < s.size(); ++k)
    if (!std::isdigit(static_cast<unsigned char>(s[k]))) return false;
  *out = std::stoi(s);
  return true;
}

namespace {

// "r7c3" / "r-1c0" -> a grid position as written.
bool parse_grid_position(const std::string& s, int* row, int* col) {
  const size_t c = s.find('c');
  return s.size() >= 4 && s[0] == 'r' && c != std::string::npos && parse_int(s.substr(1, c - 1), row) &&
         parse_int(s.substr(c + 1), col);
}

// "120", "85.5" -> a pixel coordinate (finite, not negative).
bool parse_pixel(const std::string& s, double* out) {
  if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789.") != std::string::npos) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// The text after ':' ("q=r7c3", "q=x120y85", "q=cls", "q=reg2", "k=r7c3", "received") as a query.
}  // namespace

TokenQuery parse_query_text(const std::string& item, const std::string& s) {
  TokenQuery q;
  q.written = s;
  if (s == "received") {
    q.kind = TokenQuery::Kind::Received;
    return q;
  }
  const std::string what = s.size() > 2 ? s.substr(2) : std::string();
  if (s.rfind("k=", 0) == 0 && parse_grid_position(what, &q.row, &q.col)) {
    q.kind = TokenQuery::Kind::KeyPatch;
    return q;
  }
  if (s.rfind("q=", 0) != 0)
    throw Error("'" + item + "': '" + s + "' is not a token query (q=<token>, k=r<row>c<col> or received)");
  const size_t y = what.find('y');
  int k = 0;
  if (parse_grid_position(what, &q.row, &q.col)) {
    q.kind = TokenQuery::Kind::Patch;
  } else if (what.size() > 1 && what[0] == 'x' && y != std::string::npos && parse_pixel(what.substr(1, y - 1), &q.x) &&
             parse_pixel(what.substr(y + 1), &q.y)) {
    q.kind = TokenQuery::Kind::Pixel;
  } else if (what == "cls" || what == "dist" || (what.rfind("reg", 0) == 0 && parse_int(what.substr(3), &k) && k >= 0)) {
    q.kind = TokenQuery::Kind::Prefix;
    q.prefix = what;
  } else {
    throw Error("'" + item + "': '" + what + "' is not a query token (r<row>c<col>, x<x>y<y>, cls, dist or reg<k>)");
  }
  return q;
}

// The canonical text of a resolved query: "" (the default row), ":q=r7c3", ":q=x120y85", ":q=reg2",
// ":k=r7c3", ":received".
std::string query_suffix(const TokenQuery& q) {
  const std::string cell = "r" + std::to_string(q.row) + "c" + std::to_string(q.col);
  switch (q.kind) {
    case TokenQuery::Kind::ClassRow: return "";
    case TokenQuery::Kind::Patch: return ":q=" + cell;
    case TokenQuery::Kind::Pixel: return ":q=x" + number_text(q.x) + "y" + number_text(q.y);
    case TokenQuery::Kind::Prefix: return ":q=" + q.prefix;
    case TokenQuery::Kind::KeyPatch: return ":k=" + cell;
    case TokenQuery::Kind::Received: return ":received";
  }
  return "";
}

// The query's grid position in range (negative from the end) and its token; a prefix word's token. Throws
// attnmap::Error naming the view for a patch outside the grid or a prefix token the model does not have.
TokenQuery resolve_query(const ViewSpec& v, const HParams& hp) {
  TokenQuery q = v.query;
  const int cls = hp.class_token ? 1 : 0;
  if (q.kind == TokenQuery::Kind::Patch || q.kind == TokenQuery::Kind::KeyPatch) {
    const int row = q.row < 0 ? q.row + hp.grid_h : q.row, col = q.col < 0 ? q.col + hp.grid_w : q.col;
    if (row < 0 || row >= hp.grid_h || col < 0 || col >= hp.grid_w)
      throw Error("'" + v.written + "': patch (" + std::to_string(q.row) + ", " + std::to_string(q.col) +
                  ") is outside the " + std::to_string(hp.grid_h) + "x" + std::to_string(hp.grid_w) + " patch grid");
    q.row = row;
    q.col = col;
    q.token = hp.num_prefix + row * hp.grid_w + col;
  } else if (q.kind == TokenQuery::Kind::Prefix) {
    const int reg = q.prefix.rfind("reg", 0) == 0 ? std::stoi(q.prefix.substr(3)) : -1;
    if (q.prefix == "cls" && cls) q.token = 0;
    if (q.prefix == "dist" && hp.num_dist > 0) q.token = cls;
    if (reg >= 0 && reg < hp.num_registers) q.token = cls + hp.num_dist + reg;
    if (q.token < 0)
      throw Error("'" + v.written + "': the model has no " +
                  (q.prefix == "cls" ? std::string("class token") : q.prefix == "dist" ? std::string("distillation token")
                   : "register " + std::to_string(reg) + " (it has " + std::to_string(hp.num_registers) + " registers)"));
  }
  return q;
}

// ", query patch (7, 3)", ", query pixel (120, 85)", ", register 2's row", ", attention to patch (7, 3)",
// ", attention received"; "" for the default row.
std::string query_words(const TokenQuery& q) {
  const std::string cell = "(" + std::to_string(q.row) + ", " + std::to_string(q.col) + ")";
  switch (q.kind) {
    case TokenQuery::Kind::ClassRow: return "";
    case TokenQuery::Kind::Patch: return ", query patch " + cell;
    case TokenQuery::Kind::Pixel: return ", query pixel (" + number_text(q.x) + ", " + number_text(q.y) + ")";
    case TokenQuery::Kind::Prefix:
      return q.prefix == "cls" ? ", class token's row" : q.prefix == "dist" ? ", distillation token's row"
                                                        : ", register " + q.prefix.substr(3) + "'s row";
    case TokenQuery::Kind::KeyPatch: return ", attention to patch " + cell;
    case TokenQuery::Kind::Received: return ", attention received";
  }
  return "";
}

// The line a resolved (and placed) query reads. Throws attnmap::Error for a pixel query not placed yet.
TokenLine line_of(const ResolvedView& v) {
  const TokenQuery& q = v.spec.query;
  if (q.kind == TokenQuery::Kind::Received) return TokenLine{TokenLine::Kind::ColumnMean, 0};
  if (q.token < 0) throw Error("'" + v.name + "': the pixel query needs the photo's box (place_query)");
  return TokenLine{q.kind == TokenQuery::Kind::KeyPatch ? TokenLine::Kind::Column : TokenLine::Kind::Row, q.token};
}

}  // namespace view_detail

using namespace view_detail;

TokenQuery parse_token_query(const std::string& text) { return parse_query_text(text, text); }

std::string describe_query(const TokenQuery& q) {
  const std::string w = query_words(q);
  return w.empty() ? w : w.substr(2);
}

bool has_token_query(const ResolvedView& v) { return v.spec.query.kind != TokenQuery::Kind::ClassRow; }

ResolvedView place_query(const ResolvedView& v, const HParams& hp, const Box& box) {
  if (v.spec.query.kind != TokenQuery::Kind::Pixel) return v;
  ResolvedView p = v;
  TokenQuery& q = p.spec.query;
  const double bw = box.x1 - box.x0, bh = box.y1 - box.y0;
  const double u = (q.x - box.x0) / bw, w = (q.y - box.y0) / bh;  // in [0, 1) inside the box
  if (!(bw > 0 && bh > 0 && u >= 0 && u < 1 && w >= 0 && w < 1))
    throw Error("'" + v.spec.written + "': pixel (" + number_text(q.x) + ", " + number_text(q.y) +
                ") is outside the part of the photo the model sees (x " + number_text(box.x0) + ".." +
                number_text(box.x1) + ", y " + number_text(box.y0) + ".." + number_text(box.y1) + ")");
  q.col = std::min(hp.grid_w - 1, static_cast<int>(u * hp.grid_w));
  q.row = std::min(hp.grid_h - 1, static_cast<int>(w * hp.grid_h));
  q.token = hp.num_prefix + q.row * hp.grid_w + q.col;
  return p;
}

int marked_patch(const ResolvedView& v, const HParams& hp) {
  const TokenQuery& q = v.spec.query;
  const bool cell = q.kind == TokenQuery::Kind::Patch || q.kind == TokenQuery::Kind::KeyPatch ||
                    (q.kind == TokenQuery::Kind::Pixel && q.token >= 0);
  return cell ? q.row * hp.grid_w + q.col : -1;
}

std::string view_label(const ResolvedView& v, int block_base) { return describe_view(v, block_base); }

}  // namespace attnmap
