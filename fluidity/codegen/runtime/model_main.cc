// The executable of a standalone compiled model: runs it on .npy inputs, writes .npy outputs.
//
//   OUT/model_run [--params FILE] [--lod NAME=OFF,OFF,...] NAME=IN.npy ... [-o DIR]
//
// Inputs are given by feed name (or, without NAME=, in the model's feed order); --lod gives
// an input's level-0 sequence offsets. The parameters default to model.params beside the
// executable. Each output is written to DIR/<name>.npy (default: the current directory) and
// printed as name, dtype and shape. Exit status 0, or 1 with a message on stderr.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fluidity_model.h"
#include "sizes.h"

namespace {

struct Dtype {
    int code;
    const char* descr;
    int size;
};
const Dtype DTYPES[] = {{5, "<f4", 4}, {6, "<f8", 8}, {3, "<i8", 8}, {2, "<i4", 4},
                        {0, "|b1", 1}, {20, "|u1", 1}, {21, "|i1", 1}, {1, "<i2", 2}};

const Dtype* by_code(int code) {
    for (const Dtype& d : DTYPES)
        if (d.code == code) return &d;
    return nullptr;
}

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "model_run: error: %s\n", msg.c_str());
    std::exit(1);
}

struct Array {
    const Dtype* dtype = nullptr;
    std::vector<int64_t> dims;
    std::vector<char> data;
};

// The value of `key` in a .npy header dict ("{'descr': '<f4', 'fortran_order': False, ...}").
std::string field(const std::string& h, const std::string& key) {
    size_t k = h.find("'" + key + "'");
    if (k == std::string::npos) return "";
    size_t c = h.find(':', k);
    if (c == std::string::npos) return "";
    size_t s = h.find_first_not_of(' ', c + 1);
    size_t e = h[s] == '(' ? h.find(')', s) + 1 : h.find_first_of(",}", s);
    return h.substr(s, e - s);
}

Array read_npy(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) die(path + ": cannot open");
    unsigned char magic[8];
    if (std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, "\x93NUMPY", 6) != 0)
        die(path + ": not a .npy file");
    uint32_t hlen = 0;
    if (magic[6] == 1) {
        uint16_t h16;
        if (std::fread(&h16, 2, 1, f) != 1) die(path + ": truncated header");
        hlen = h16;
    } else if (std::fread(&hlen, 4, 1, f) != 1) {
        die(path + ": truncated header");
    }
    std::string h(hlen, ' ');
    if (std::fread(&h[0], 1, hlen, f) != hlen) die(path + ": truncated header");
    Array a;
    std::string descr = field(h, "descr");
    for (const Dtype& d : DTYPES)
        if (descr == std::string("'") + d.descr + "'") a.dtype = &d;
    if (!a.dtype) die(path + ": dtype " + descr + " is not one a model takes (little-endian "
                      "float32/64, int8/16/32/64, uint8, bool)");
    if (field(h, "fortran_order") != "False") die(path + ": Fortran-ordered; save it C-ordered");
    std::string shape = field(h, "shape");
    int64_t n = 1;
    int sane = 1;
    for (size_t i = 1; i < shape.size();) {
        size_t j = shape.find_first_of(",)", i);
        if (j == std::string::npos) j = shape.size();      // a header cut short
        std::string tok = shape.substr(i, j - i);
        if (tok.find_first_not_of(' ') != std::string::npos) {
            a.dims.push_back(std::strtoll(tok.c_str(), nullptr, 10));
            n = fl_mul_checked(n, a.dims.back(), &sane);
        }
        i = j + 1;
    }
    n = fl_mul_checked(n, a.dtype->size, &sane);
    if (!sane) die(path + ": shape " + shape + " has a negative dim or too many elements");
    a.data.resize((size_t)n);
    if (!a.data.empty() && std::fread(a.data.data(), 1, a.data.size(), f) != a.data.size())
        die(path + ": data cut short");
    std::fclose(f);
    return a;
}

void write_npy(const std::string& path, const fluidity_tensor& t) {
    const Dtype* d = by_code(t.dtype);
    if (!d) die(path + ": an output of an unknown dtype");
    std::string shape = "(";
    int64_t n = 1;
    for (int i = 0; i < t.ndim; ++i) {
        shape += std::to_string(t.dims[i]) + (t.ndim == 1 || i + 1 < t.ndim ? "," : "");
        n *= t.dims[i];
    }
    shape += ")";
    std::string h = std::string("{'descr': '") + d->descr +
                    "', 'fortran_order': False, 'shape': " + shape + ", }";
    while ((10 + h.size() + 1) % 64) h += ' ';
    h += '\n';
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) die(path + ": cannot write");
    uint16_t hlen = (uint16_t)h.size();
    std::fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    std::fwrite(&hlen, 2, 1, f);
    std::fwrite(h.data(), 1, h.size(), f);
    if (n) std::fwrite(t.data, (size_t)d->size, (size_t)n, f);
    if (std::fclose(f) != 0) die(path + ": cannot write");
}

std::string beside_exe(const char* name) {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return name;
    buf[n] = 0;
    std::string p(buf);
    size_t slash = p.rfind('/');
    return (slash == std::string::npos ? std::string(".") : p.substr(0, slash)) + "/" + name;
}

std::string file_name(const std::string& var) {
    std::string s = var;
    for (char& c : s)
        if (c == '/' || c == '\\' || c == ':') c = '_';
    return s + ".npy";
}

}  // namespace

int main(int argc, char** argv) {
    std::string params = beside_exe("model.params"), out_dir = ".";
    std::map<std::string, std::string> named;
    std::vector<std::string> positional;
    std::map<std::string, std::vector<int64_t>> lods;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) die(a + " needs a value");
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            std::printf("usage: %s [--params FILE] [--lod NAME=OFF,...] NAME=IN.npy ... "
                        "[-o DIR]\ninputs:", argv[0]);
            for (int k = 0; k < fluidity_model_num_inputs(); ++k)
                std::printf(" %s", fluidity_model_input_name(k));
            std::printf("\n");
            return 0;
        } else if (a == "--params") {
            params = next();
        } else if (a == "-o" || a == "--output") {
            out_dir = next();
        } else if (a == "--lod") {
            std::string s = next();
            size_t eq = s.find('=');
            if (eq == std::string::npos) die("--lod " + s + ": expected NAME=OFF,OFF,...");
            std::vector<int64_t>& v = lods[s.substr(0, eq)];
            for (size_t p = eq + 1; p <= s.size();) {
                size_t c = s.find(',', p);
                if (c == std::string::npos) c = s.size();
                v.push_back(std::strtoll(s.substr(p, c - p).c_str(), nullptr, 10));
                p = c + 1;
            }
        } else if (a.find('=') != std::string::npos) {
            named[a.substr(0, a.find('='))] = a.substr(a.find('=') + 1);
        } else {
            positional.push_back(a);
        }
    }
    int n_in = fluidity_model_num_inputs(), n_out = fluidity_model_num_outputs();
    std::vector<std::string> paths(n_in);
    for (int k = 0; k < n_in; ++k) {
        std::string name = fluidity_model_input_name(k);
        if (named.count(name)) {
            paths[k] = named[name];
            named.erase(name);
        } else if (!positional.empty()) {
            paths[k] = positional.front();
            positional.erase(positional.begin());
        } else {
            die("no value for input '" + name + "' (give NAME=FILE.npy)");
        }
    }
    if (!named.empty()) die("the model has no input '" + named.begin()->first + "'");
    if (!positional.empty()) die("more inputs than the model's " + std::to_string(n_in));
    std::vector<Array> arrays(n_in);
    std::vector<fluidity_tensor> ins(n_in), outs(n_out);
    for (int k = 0; k < n_in; ++k) {
        arrays[k] = read_npy(paths[k]);
        fluidity_tensor& t = ins[k];
        std::memset(&t, 0, sizeof t);
        t.dtype = arrays[k].dtype->code;
        if (arrays[k].dims.size() > FLUIDITY_MAX_DIMS)
            die(paths[k] + ": more than " + std::to_string(FLUIDITY_MAX_DIMS) + " dims");
        t.ndim = (int)arrays[k].dims.size();
        for (int d = 0; d < t.ndim; ++d) t.dims[d] = arrays[k].dims[d];
        t.data = arrays[k].data.data();
        auto l = lods.find(fluidity_model_input_name(k));
        if (l != lods.end()) {
            t.lod = l->second.data();
            t.lod_len = (int64_t)l->second.size();
        }
    }
    if (mkdir(out_dir.c_str(), 0777) != 0 && errno != EEXIST)
        die(out_dir + ": cannot make the output directory");
    char err[512] = {0};
    fluidity_model* m = fluidity_model_load(params.c_str(), err, sizeof err);
    if (!m) die(err);
    if (fluidity_model_run(m, ins.data(), outs.data(), err, sizeof err)) die(err);
    for (int k = 0; k < n_out; ++k) {
        std::string name = fluidity_model_output_name(k);
        write_npy(out_dir + "/" + file_name(name), outs[k]);
        std::printf("%s: %s [", name.c_str(), by_code(outs[k].dtype) ?
                    by_code(outs[k].dtype)->descr : "?");
        for (int d = 0; d < outs[k].ndim; ++d) std::printf(d ? ", %lld" : "%lld",
                                                            (long long)outs[k].dims[d]);
        std::printf("]\n");
    }
    fluidity_model_free(m);
    return 0;
}
