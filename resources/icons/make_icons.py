#!/usr/bin/env python3
# make_icons.py: draws Tessera's icon (a 3x3 mosaic of rounded tiles on a dark rounded square)
# as tessera-studio.svg and as PNGs in the hicolor sizes 16..512, from one list of shapes, with
# no library beyond the standard one (analytic anti-aliasing by signed distance, zlib PNG writer).
# Usage: python3 resources/icons/make_icons.py   (rewrites the files next to this script)
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = [16, 22, 24, 32, 48, 64, 128, 256, 512]

# shapes in a 0..1 unit square: (x, y, w, h, radius, (r, g, b))
BACKGROUND = (0.0, 0.0, 1.0, 1.0, 0.18, (0x1E, 0x2A, 0x44))
TILE_COLORS = [
    (0x4F, 0xC3, 0xF7), (0x29, 0x79, 0xFF), (0x7C, 0x4D, 0xFF),
    (0x26, 0xA6, 0x9A), (0xFF, 0xCA, 0x28), (0x29, 0x79, 0xFF),
    (0x66, 0xBB, 0x6A), (0x26, 0xA6, 0x9A), (0x4F, 0xC3, 0xF7),
]


def shapes():
    out = [BACKGROUND]
    margin, gap = 0.16, 0.05
    tile = (1.0 - 2 * margin - 2 * gap) / 3
    for i, color in enumerate(TILE_COLORS):
        r, c = divmod(i, 3)
        out.append((margin + c * (tile + gap), margin + r * (tile + gap), tile, tile, 0.04, color))
    return out


def rounded_rect_distance(px, py, x, y, w, h, rad):
    # signed distance (unit square units) from point to a rounded rectangle; < 0 inside
    cx, cy = x + w / 2, y + h / 2
    qx = abs(px - cx) - (w / 2 - rad)
    qy = abs(py - cy) - (h / 2 - rad)
    ox, oy = max(qx, 0.0), max(qy, 0.0)
    return (ox * ox + oy * oy) ** 0.5 + min(max(qx, qy), 0.0) - rad


def render_rgba(size):
    # returns rows of RGBA bytes, size x size, premultiplied compositing "over" a transparent base
    pix = [[0.0, 0.0, 0.0, 0.0] for _ in range(size * size)]
    for (x, y, w, h, rad, (r, g, b)) in shapes():
        x0, x1 = max(0, int(x * size) - 1), min(size, int((x + w) * size) + 2)
        y0, y1 = max(0, int(y * size) - 1), min(size, int((y + h) * size) + 2)
        for j in range(y0, y1):
            for i in range(x0, x1):
                d = rounded_rect_distance((i + 0.5) / size, (j + 0.5) / size, x, y, w, h, rad) * size
                a = min(1.0, max(0.0, 0.5 - d))
                if a <= 0.0:
                    continue
                p = pix[j * size + i]
                inv = 1.0 - a
                p[0] = r / 255 * a + p[0] * inv
                p[1] = g / 255 * a + p[1] * inv
                p[2] = b / 255 * a + p[2] * inv
                p[3] = a + p[3] * inv
    rows = []
    for j in range(size):
        row = bytearray()
        for i in range(size):
            pr, pg, pb, pa = pix[j * size + i]
            if pa > 0:
                row += bytes((round(pr / pa * 255), round(pg / pa * 255), round(pb / pa * 255), round(pa * 255)))
            else:
                row += b"\0\0\0\0"
        rows.append(bytes(row))
    return rows


def write_png(path, size, rows):
    def chunk(tag, data):
        c = struct.pack(">I", len(data)) + tag + data
        return c + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    raw = b"".join(b"\0" + r for r in rows)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def write_svg(path):
    parts = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<svg xmlns="http://www.w3.org/2000/svg" width="512" height="512" viewBox="0 0 512 512">',
             '  <title>Tessera Studio</title>']
    for (x, y, w, h, rad, (r, g, b)) in shapes():
        parts.append('  <rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" rx="%.2f" fill="#%02x%02x%02x"/>'
                     % (x * 512, y * 512, w * 512, h * 512, rad * 512, r, g, b))
    parts.append('</svg>')
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


if __name__ == "__main__":
    write_svg(os.path.join(HERE, "tessera-studio.svg"))
    for s in SIZES:
        write_png(os.path.join(HERE, "tessera-studio-%d.png" % s), s, render_rgba(s))
        print("wrote tessera-studio-%d.png" % s)
