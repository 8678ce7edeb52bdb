// hash.hpp - content hashes of files (OpenSSL SHA-256), for the provenance of outputs.
#pragma once
#include <string>

namespace attnmap {

/// SHA-256 (FIPS 180-4) of the file's bytes as 64 lower-case hex digits, the same as `sha256sum FILE`.
/// Read in 1 MiB blocks with OpenSSL's EVP interface (SHA-NI / AVX2 code where the CPU has it). Throws
/// attnmap::Error naming `path` when it cannot be opened or read.
std::string sha256_file(const std::string& path);

/// SHA-256 of `bytes`, as sha256_file.
std::string sha256_text(const std::string& bytes);

}  // namespace attnmap
