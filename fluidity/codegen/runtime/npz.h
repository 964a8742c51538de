// Reading numpy's .npy and .npz files in the standalone model's executable (model_main.cc),
// as hostile input: every length and offset is checked against the bytes actually there
// before it is used, so a cut, forged or random file is an error message, never a crash or
// a read outside the buffer.
//
// An .npz is a zip of .npy members (numpy's savez). np.savez stores them uncompressed, and
// those are read; a compressed member (np.savez_compressed) is refused with a message that
// says so, since a deflate decoder is more code than a model's inputs are worth. Zip64
// records (numpy writes them for every member) are read for sizes and offsets.
//
//   fl::npz::Array a;  std::string err;
//   if (!fl::npz::parse_npy(bytes, size, &a, &err)) ...          // one .npy in memory
//   std::vector<fl::npz::Member> m;
//   if (!fl::npz::list_members(bytes, size, &m, &err)) ...      // an .npz: its members
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace fl {
namespace npz {

struct Dtype {
    int code;            // Paddle's VarType
    const char* descr;   // numpy's
    int size;
    const char* name;
};
// little-endian (or byte-sized) numeric types a model takes
inline const Dtype* dtypes(int* n) {
    static const Dtype D[] = {{5, "<f4", 4, "float32"}, {6, "<f8", 8, "float64"},
                              {3, "<i8", 8, "int64"},   {2, "<i4", 4, "int32"},
                              {0, "|b1", 1, "bool"},    {20, "|u1", 1, "uint8"},
                              {21, "|i1", 1, "int8"},   {1, "<i2", 2, "int16"}};
    *n = (int)(sizeof D / sizeof D[0]);
    return D;
}

inline const Dtype* by_code(int code) {
    int n;
    const Dtype* d = dtypes(&n);
    for (int i = 0; i < n; ++i)
        if (d[i].code == code) return &d[i];
    return nullptr;
}

struct Array {
    const Dtype* dtype = nullptr;
    std::vector<int64_t> dims;
    std::vector<char> data;
};

constexpr uint64_t MAX_HEADER = 1 << 16;      // numpy's own headers are far smaller
constexpr int MAX_DIMS = 8;

inline uint64_t le(const unsigned char* p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// The value of `key` in a .npy header dict: "{'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }". Empty when absent or malformed.
inline std::string field(const std::string& h, const std::string& key) {
    size_t k = h.find("'" + key + "'");
    if (k == std::string::npos) return "";
    size_t c = h.find(':', k);
    if (c == std::string::npos) return "";
    size_t s = h.find_first_not_of(' ', c + 1);
    if (s == std::string::npos) return "";
    size_t e = h[s] == '(' ? h.find(')', s) : h.find_first_of(",}", s);
    if (e == std::string::npos) return "";
    return h.substr(s, e - s + (h[s] == '(' ? 1 : 0));
}

// The dims of a shape tuple "(2, 3)" / "(5,)" / "()"; false when it is not one of
// non-negative integers (at most MAX_DIMS of them).
inline bool parse_shape(const std::string& shape, std::vector<int64_t>* dims) {
    if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') return false;
    std::string body = shape.substr(1, shape.size() - 2);
    size_t i = 0;
    while (i < body.size()) {
        size_t j = body.find(',', i);
        if (j == std::string::npos) j = body.size();
        std::string tok = body.substr(i, j - i);
        size_t a = tok.find_first_not_of(' '), b = tok.find_last_not_of(' ');
        if (a == std::string::npos) {
            if (j != body.size()) return false;      // "(,)" or "(2,,3)"
            break;
        }
        tok = tok.substr(a, b - a + 1);
        if (tok.empty() || tok.size() > 18) return false;
        int64_t v = 0;
        for (char ch : tok) {
            if (ch < '0' || ch > '9') return false;
            v = v * 10 + (ch - '0');
        }
        dims->push_back(v);
        if ((int)dims->size() > MAX_DIMS) return false;
        i = j + 1;
    }
    return true;
}

inline bool fail(std::string* err, const std::string& msg) {
    *err = msg;
    return false;
}

// One .npy held in [p, p + n): its dtype, dims and data (copied), checked against n.
inline bool parse_npy(const unsigned char* p, uint64_t n, Array* a, std::string* err) {
    if (n < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0) return fail(err, "not a .npy array");
    int major = p[6];
    uint64_t hlen, at;
    if (major == 1) {
        hlen = le(p + 8, 2);
        at = 10;
    } else if (major == 2 || major == 3) {
        if (n < 12) return fail(err, "truncated .npy header");
        hlen = le(p + 8, 4);
        at = 12;
    } else {
        return fail(err, "a .npy format version this reader does not know (" +
                             std::to_string(major) + ")");
    }
    if (hlen > MAX_HEADER || hlen > n - at) return fail(err, "truncated .npy header");
    std::string h((const char*)p + at, (size_t)hlen);
    at += hlen;
    std::string descr = field(h, "descr");
    int nd;
    const Dtype* d = dtypes(&nd);
    a->dtype = nullptr;
    for (int i = 0; i < nd; ++i)
        if (descr == std::string("'") + d[i].descr + "'") a->dtype = &d[i];
    if (!a->dtype)
        return fail(err, "dtype " + (descr.empty() ? std::string("(none)") : descr.substr(0, 40)) +
                             " is not one a model takes (little-endian float32/64, "
                             "int8/16/32/64, uint8, bool)");
    if (field(h, "fortran_order") != "False") return fail(err, "Fortran-ordered; save it C-ordered");
    a->dims.clear();
    if (!parse_shape(field(h, "shape"), &a->dims))
        return fail(err, "a shape that is not a tuple of at most 8 non-negative integers");
    uint64_t count = 1;
    const uint64_t limit = n - at;
    for (int64_t dim : a->dims) {
        if (dim != 0 && count > limit / (uint64_t)dim) {       // more elements than bytes
            count = UINT64_MAX;
            break;
        }
        count *= (uint64_t)dim;
    }
    if (count == UINT64_MAX || count > limit / (uint64_t)a->dtype->size)
        return fail(err, "data cut short (the header promises more than the file holds)");
    uint64_t bytes = count * (uint64_t)a->dtype->size;
    if (bytes != limit)
        return fail(err, "data of " + std::to_string(limit) + " bytes where the header's shape "
                         "needs " + std::to_string(bytes));
    a->data.assign((const char*)p + at, (const char*)p + at + bytes);
    return true;
}

struct Member {
    std::string name;          // without its .npy suffix
    uint64_t offset = 0;       // of its data in the archive
    uint64_t size = 0;
};

// Zip64's extended sizes and offset, in the order the zip spec gives them, each present
// only when its 32-bit field is 0xFFFFFFFF.
inline bool zip64_extra(const unsigned char* x, uint64_t xlen, uint64_t* usize, uint64_t* csize,
                        uint64_t* offset) {
    uint64_t i = 0;
    while (i + 4 <= xlen) {
        uint64_t id = le(x + i, 2), len = le(x + i + 2, 2);
        if (len > xlen - i - 4) return false;
        if (id == 1) {
            const unsigned char* q = x + i + 4;
            uint64_t left = len;
            for (uint64_t* f : {usize, csize, offset}) {
                if (*f != 0xFFFFFFFFu) continue;
                if (left < 8) return false;
                *f = le(q, 8);
                q += 8;
                left -= 8;
            }
            return true;
        }
        i += 4 + len;
    }
    return true;
}

// The members of an .npz held in [p, p + n), from its central directory; false with a
// message for anything that is not a zip of uncompressed .npy members within the bytes.
inline bool list_members(const unsigned char* p, uint64_t n, std::vector<Member>* out,
                         std::string* err) {
    if (n < 22) return fail(err, "not an .npz (too short to be a zip archive)");
    uint64_t eocd = UINT64_MAX;
    uint64_t lo = n > 22 + 65535 ? n - 22 - 65535 : 0;
    for (uint64_t i = n - 22 + 1; i-- > lo;)
        if (le(p + i, 4) == 0x06054b50u) {
            eocd = i;
            break;
        }
    if (eocd == UINT64_MAX) return fail(err, "not an .npz (no zip directory at its end)");
    uint64_t entries = le(p + eocd + 10, 2), cd_size = le(p + eocd + 12, 4),
             cd_off = le(p + eocd + 16, 4);
    if ((entries == 0xFFFF || cd_off == 0xFFFFFFFFu || cd_size == 0xFFFFFFFFu) && eocd >= 20 &&
        le(p + eocd - 20, 4) == 0x07064b50u) {             // the zip64 end record
        uint64_t z = le(p + eocd - 20 + 8, 8);
        if (z > n || n - z < 56 || le(p + z, 4) != 0x06064b50u)
            return fail(err, "a broken zip64 directory");
        entries = le(p + z + 32, 8);
        cd_size = le(p + z + 40, 8);
        cd_off = le(p + z + 48, 8);
    }
    if (cd_off > n || cd_size > n - cd_off) return fail(err, "its zip directory lies outside the file");
    if (entries > cd_size / 46) return fail(err, "a zip directory with more entries than room");
    const unsigned char* c = p + cd_off;
    uint64_t left = cd_size;
    for (uint64_t e = 0; e < entries; ++e) {
        if (left < 46 || le(c, 4) != 0x02014b50u) return fail(err, "a broken zip directory entry");
        uint64_t method = le(c + 10, 2), csize = le(c + 20, 4), usize = le(c + 24, 4);
        uint64_t nlen = le(c + 28, 2), xlen = le(c + 30, 2), clen = le(c + 32, 2);
        uint64_t local = le(c + 42, 4);
        if (46 + nlen + xlen + clen > left) return fail(err, "a broken zip directory entry");
        std::string name((const char*)c + 46, (size_t)nlen);
        if (!zip64_extra(c + 46 + nlen, xlen, &usize, &csize, &local))
            return fail(err, "member '" + name + "': a broken zip64 field");
        if (method != 0)
            return fail(err, "member '" + name + "' is compressed (np.savez_compressed); "
                             "model_run reads np.savez's uncompressed members: save it with "
                             "np.savez");
        if (csize != usize) return fail(err, "member '" + name + "': sizes disagree");
        if (local > n || n - local < 30 || le(p + local, 4) != 0x04034b50u)
            return fail(err, "member '" + name + "': its local header lies outside the file");
        uint64_t data = local + 30 + le(p + local + 26, 2) + le(p + local + 28, 2);
        if (data > n || usize > n - data)
            return fail(err, "member '" + name + "': its data lies outside the file");
        if (name.size() < 4 || name.compare(name.size() - 4, 4, ".npy") != 0)
            return fail(err, "member '" + name + "' is not a .npy array");
        Member m;
        m.name = name.substr(0, name.size() - 4);
        m.offset = data;
        m.size = usize;
        out->push_back(m);
        c += 46 + nlen + xlen + clen;
        left -= 46 + nlen + xlen + clen;
    }
    return true;
}

// The whole of a file (inputs are small next to memory); false with a message.
inline bool read_file(const std::string& path, std::vector<unsigned char>* buf, std::string* err) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return fail(err, "cannot open");
    buf->clear();
    unsigned char chunk[1 << 16];
    size_t got;
    while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0) buf->insert(buf->end(), chunk, chunk + got);
    bool bad = std::ferror(f) != 0;
    std::fclose(f);
    if (bad) return fail(err, "cannot read (is it a directory?)");
    return true;
}

}  // namespace npz
}  // namespace fl
