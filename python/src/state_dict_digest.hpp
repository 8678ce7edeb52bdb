// state_dict_digest.hpp - the SHA-256 digest of a state dict given in memory (attnmap_module.cpp from_state_dict).
#pragma once
#include <openssl/evp.h>

#include <string>

namespace attnmap_py {

// SHA-256 over a state dict, in name order: for each tensor its name, '\n', its shape as PyTorch prints it,
// '\n', then its float32 values little-endian (a non-float tensor: its dtype name and its int64 values). The
// record's weights_sha256 of a model built in memory: two state dicts with the same names, shapes and values
// have the same digest.
class StateDictDigest {
 public:
  StateDictDigest() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~StateDictDigest() { EVP_MD_CTX_free(ctx_); }
  StateDictDigest(const StateDictDigest&) = delete;
  StateDictDigest& operator=(const StateDictDigest&) = delete;
  void add(const void* p, size_t n) { EVP_DigestUpdate(ctx_, p, n); }
  void add(const std::string& s) { add(s.data(), s.size()); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_, md, &n);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < n; ++i) out += digits[md[i] >> 4], out += digits[md[i] & 15];
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace attnmap_py
