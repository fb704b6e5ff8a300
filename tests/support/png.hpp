// Test support: reads an 8-bit RGB or RGBA PNG (what headless Chromium's --screenshot writes)
// into RGB pixels, with zlib for the image data, so a test can look at a rendered page.
#pragma once

#include <zlib.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace ipuml::testing {

struct Image {
  int width = 0, height = 0;
  std::vector<std::array<uint8_t, 3>> rgb;  // row-major
  const std::array<uint8_t, 3>& at(int x, int y) const {
    return rgb[static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)];
  }
};

inline Image read_png(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::vector<uint8_t> d((std::istreambuf_iterator<char>(f)),
                               std::istreambuf_iterator<char>());
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("read_png " + path + ": " + why);
  };
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (d.size() < 8 || !std::equal(sig, sig + 8, d.begin())) fail("not a PNG");
  auto be32 = [&](size_t at) {
    return (uint32_t{d[at]} << 24) | (uint32_t{d[at + 1]} << 16) | (uint32_t{d[at + 2]} << 8) |
           uint32_t{d[at + 3]};
  };
  Image img;
  int channels = 0;
  std::vector<uint8_t> idat;
  for (size_t at = 8; at + 12 <= d.size();) {
    const uint32_t len = be32(at);
    const std::string type(d.begin() + static_cast<std::ptrdiff_t>(at + 4),
                           d.begin() + static_cast<std::ptrdiff_t>(at + 8));
    if (at + 12 + len > d.size()) fail("truncated chunk " + type);
    const uint8_t* body = d.data() + at + 8;
    if (type == "IHDR") {
      img.width = static_cast<int>(be32(at + 8));
      img.height = static_cast<int>(be32(at + 12));
      const int depth = body[8], color = body[9], interlace = body[12];
      if (depth != 8 || (color != 2 && color != 6) || interlace != 0)
        fail("only 8-bit RGB/RGBA without interlace is read");
      channels = color == 2 ? 3 : 4;
    } else if (type == "IDAT") {
      idat.insert(idat.end(), body, body + len);
    } else if (type == "IEND") {
      break;
    }
    at += 12 + len;
  }
  if (channels == 0 || img.width <= 0 || img.height <= 0) fail("no IHDR");
  const size_t stride = static_cast<size_t>(img.width) * static_cast<size_t>(channels);
  std::vector<uint8_t> raw((stride + 1) * static_cast<size_t>(img.height));
  uLongf raw_len = static_cast<uLongf>(raw.size());
  if (uncompress(raw.data(), &raw_len, idat.data(), static_cast<uLong>(idat.size())) != Z_OK ||
      raw_len != raw.size())
    fail("bad image data");
  // Undo the per-row filters (PNG spec, section 9).
  std::vector<uint8_t> cur(stride), prev(stride, 0);
  img.rgb.resize(static_cast<size_t>(img.width) * static_cast<size_t>(img.height));
  const size_t bpp = static_cast<size_t>(channels);
  for (int y = 0; y < img.height; ++y) {
    const uint8_t* row = raw.data() + static_cast<size_t>(y) * (stride + 1);
    const int filter = row[0];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= bpp ? cur[i - bpp] : 0, b = prev[i], c = i >= bpp ? prev[i - bpp] : 0;
      int pred = 0;
      switch (filter) {
        case 0:
          pred = 0;
          break;
        case 1:
          pred = a;
          break;
        case 2:
          pred = b;
          break;
        case 3:
          pred = (a + b) / 2;
          break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default:
          fail("bad filter " + std::to_string(filter));
      }
      cur[i] = static_cast<uint8_t>(row[1 + i] + pred);
    }
    for (int x = 0; x < img.width; ++x) {
      const size_t o = static_cast<size_t>(x) * bpp;
      img.rgb[static_cast<size_t>(y) * static_cast<size_t>(img.width) + static_cast<size_t>(x)] = {
          cur[o], cur[o + 1], cur[o + 2]};
    }
    std::swap(cur, prev);
  }
  return img;
}

}  // namespace ipuml::testing
