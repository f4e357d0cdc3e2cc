// The byte-level alphabet (see byte_level.h).
#include "engine/data/byte_level.h"

namespace tessera {

namespace {

std::string utf8_encode_bmp(uint32_t cp) {  // cp < 0x10000
    std::string s;
    if (cp < 0x80)
        s += (char)cp;
    else if (cp < 0x800) {
        s += (char)(0xC0 | (cp >> 6));
        s += (char)(0x80 | (cp & 0x3F));
    } else {
        s += (char)(0xE0 | (cp >> 12));
        s += (char)(0x80 | ((cp >> 6) & 0x3F));
        s += (char)(0x80 | (cp & 0x3F));
    }
    return s;
}

ByteLevelMap byte_level_map_build() {
    ByteLevelMap m;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint32_t cp = keep ? (uint32_t)b : (uint32_t)(256 + n++);
        m.encode[b] = utf8_encode_bmp(cp);
        m.decode[cp] = (uint8_t)b;
    }
    return m;
}

}  // namespace

const ByteLevelMap& byte_level_map() {
    static const ByteLevelMap m = byte_level_map_build();
    return m;
}

}  // namespace tessera
