// The executable of a standalone compiled model: runs it on .npy / .npz inputs, writes .npy
// outputs.
//
//   OUT/model_run [--params FILE] INPUTS.npz [-o DIR]
//   OUT/model_run [--params FILE] [--lod NAME=OFF,OFF,...] NAME=IN.npy ... [-o DIR]
//
// An .npz (np.savez: uncompressed) holds the inputs by feed name and, for a sequence input
// NAME, its sequence lengths as NAME.lod, as `fluidity run` takes it. Inputs may also be
// given one by one by feed name (or, without NAME=, in the model's feed order); --lod gives
// an input's level-0 sequence offsets. The parameters default to model.params beside the
// executable. Each output is written to DIR/<name>.npy (default: the current directory) and
// printed as name, dtype and shape. Exit status 0, or 1 with a message on stderr. Every
// input file is checked before it is used (runtime/npz.h).
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
#include "npz.h"

namespace {

using fl::npz::Array;
using fl::npz::Dtype;
using fl::npz::by_code;

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "model_run: error: %s\n", msg.c_str());
    std::exit(1);
}

Array read_npy(const std::string& path) {
    std::vector<unsigned char> buf;
    std::string err;
    Array a;
    if (!fl::npz::read_file(path, &buf, &err) ||
        !fl::npz::parse_npy(buf.data(), buf.size(), &a, &err))
        die(path + ": " + err);
    return a;
}

// An .npz's arrays by name; NAME.lod members go to `lengths` (sequence lengths of NAME).
void read_npz(const std::string& path, std::map<std::string, Array>* arrays,
              std::map<std::string, Array>* lengths) {
    std::vector<unsigned char> buf;
    std::vector<fl::npz::Member> members;
    std::string err;
    if (!fl::npz::read_file(path, &buf, &err) ||
        !fl::npz::list_members(buf.data(), buf.size(), &members, &err))
        die(path + ": " + err);
    for (const fl::npz::Member& m : members) {
        Array a;
        if (!fl::npz::parse_npy(buf.data() + m.offset, m.size, &a, &err))
            die(path + ": member '" + m.name + "': " + err);
        bool lod = m.name.size() > 4 && m.name.compare(m.name.size() - 4, 4, ".lod") == 0;
        std::map<std::string, Array>* into = lod ? lengths : arrays;
        std::string key = lod ? m.name.substr(0, m.name.size() - 4) : m.name;
        if (into->count(key)) die(path + ": '" + m.name + "' given twice");
        (*into)[key] = std::move(a);
    }
}

// Level-0 offsets from sequence lengths (a 1-D int32/int64 array of non-negative values).
std::vector<int64_t> offsets_of_lengths(const std::string& name, const Array& a) {
    if (a.dims.size() != 1 || (a.dtype->code != 2 && a.dtype->code != 3))
        die("lod of '" + name + "': sequence lengths must be a 1-D int32 or int64 array");
    std::vector<int64_t> off(1, 0);
    for (int64_t i = 0; i < a.dims[0]; ++i) {
        int64_t v;
        if (a.dtype->code == 3) {
            std::memcpy(&v, a.data.data() + 8 * i, 8);
        } else {
            int32_t w;
            std::memcpy(&w, a.data.data() + 4 * i, 4);
            v = w;
        }
        if (v < 0 || off.back() > INT64_MAX - v)
            die("lod of '" + name + "': sequence lengths must be non-negative");
        off.push_back(off.back() + v);
    }
    return off;
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
        if (c == '/' || c == '\\' || c == ':' || (unsigned char)c < 32 || c == 127) c = '_';
    return s + ".npy";
}

// A name as the terminal should see it: control bytes written as \xNN.
std::string printable(const std::string& s) {
    std::string out;
    char buf[8];
    for (unsigned char c : s) {
        if (c < 32 || c == 127) {
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += (char)c;
        }
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    std::string params = beside_exe("model.params"), out_dir = ".";
    std::map<std::string, std::string> named;
    std::vector<std::string> positional;
    std::map<std::string, std::vector<int64_t>> lods;
    std::map<std::string, Array> from_npz, npz_lengths;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) die(a + " needs a value");
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            std::printf("usage: %s [--params FILE] [--lod NAME=OFF,...] "
                        "(INPUTS.npz | NAME=IN.npy ...) [-o DIR]\ninputs:", argv[0]);
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
            std::string name = s.substr(0, eq);
            if (lods.count(name)) die("--lod " + name + ": given twice");
            std::vector<int64_t>& v = lods[name];
            for (size_t p = eq + 1; p <= s.size();) {
                size_t c = s.find(',', p);
                if (c == std::string::npos) c = s.size();
                std::string tok = s.substr(p, c - p);
                char* end = nullptr;
                errno = 0;
                long long x = std::strtoll(tok.c_str(), &end, 10);
                if (tok.empty() || *end || errno || x < 0)
                    die("--lod " + s + ": offsets must be non-negative integers");
                v.push_back(x);
                p = c + 1;
            }
        } else if (a.find('=') != std::string::npos) {
            std::string name = a.substr(0, a.find('='));
            if (named.count(name)) die("input '" + name + "' given twice");
            named[name] = a.substr(a.find('=') + 1);
        } else if (a.size() > 4 && a.compare(a.size() - 4, 4, ".npz") == 0) {
            read_npz(a, &from_npz, &npz_lengths);
        } else if (!a.empty() && a[0] == '-') {
            die("unknown option " + a + " (--help lists them)");
        } else {
            positional.push_back(a);
        }
    }
    int n_in = fluidity_model_num_inputs(), n_out = fluidity_model_num_outputs();
    std::vector<Array> arrays(n_in);
    std::vector<std::string> where(n_in);
    for (int k = 0; k < n_in; ++k) {
        std::string name = fluidity_model_input_name(k);
        int given = (int)named.count(name) + (int)from_npz.count(name);
        if (given > 1) die("input '" + name + "' given twice (in an .npz and as NAME=FILE)");
        if (named.count(name)) {
            where[k] = named[name];
            arrays[k] = read_npy(where[k]);
            named.erase(name);
        } else if (from_npz.count(name)) {
            where[k] = "input '" + name + "'";
            arrays[k] = std::move(from_npz[name]);
            from_npz.erase(name);
        } else if (!positional.empty()) {
            where[k] = positional.front();
            positional.erase(positional.begin());
            arrays[k] = read_npy(where[k]);
        } else {
            die("no value for input '" + name + "' (give NAME=FILE.npy, or an .npz holding it)");
        }
        if (npz_lengths.count(name)) {
            if (lods.count(name)) die("--lod " + name + ": its sequences are also in the .npz");
            lods[name] = offsets_of_lengths(name, npz_lengths[name]);
            npz_lengths.erase(name);
        }
    }
    std::string names;
    for (int k = 0; k < n_in; ++k) names += std::string(k ? ", " : "") + fluidity_model_input_name(k);
    if (!named.empty()) die("the model has no input '" + named.begin()->first + "' (its inputs: " + names + ")");
    if (!from_npz.empty()) die("the model has no input '" + from_npz.begin()->first + "' (its inputs: " + names + ")");
    if (!npz_lengths.empty()) die(npz_lengths.begin()->first + ".lod: no input named '" +
                                  npz_lengths.begin()->first + "' beside it");
    if (!positional.empty()) die("more inputs than the model's " + std::to_string(n_in));
    std::vector<fluidity_tensor> ins(n_in), outs(n_out);
    for (int k = 0; k < n_in; ++k) {
        fluidity_tensor& t = ins[k];
        std::memset(&t, 0, sizeof t);
        t.dtype = arrays[k].dtype->code;
        t.ndim = (int)arrays[k].dims.size();
        for (int d = 0; d < t.ndim; ++d) t.dims[d] = arrays[k].dims[d];
        t.data = arrays[k].data.data();
        std::string name = fluidity_model_input_name(k);
        auto l = lods.find(name);
        if (l != lods.end()) {
            const std::vector<int64_t>& off = l->second;
            int64_t rows = t.ndim ? t.dims[0] : 1;
            bool ok = off.size() >= 2 && off.front() == 0 && off.back() == rows;
            for (size_t i = 1; ok && i < off.size(); ++i) ok = off[i] >= off[i - 1];
            if (!ok)
                die("lod of '" + name + "': the sequences must cover its " + std::to_string(rows) +
                    " rows (offsets from 0, non-decreasing, ending at " + std::to_string(rows) + ")");
            t.lod = off.data();
            t.lod_len = (int64_t)off.size();
        }
    }
    for (const auto& l : lods) {
        bool known = false;
        for (int k = 0; k < n_in; ++k) known |= l.first == fluidity_model_input_name(k);
        if (!known) die("--lod " + l.first + ": the model has no input of that name (its inputs: " + names + ")");
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
        std::printf("%s: %s [", printable(name).c_str(), by_code(outs[k].dtype) ?
                    by_code(outs[k].dtype)->name : "?");
        for (int d = 0; d < outs[k].ndim; ++d) std::printf(d ? ", %lld" : "%lld",
                                                            (long long)outs[k].dims[d]);
        std::printf("]\n");
    }
    fluidity_model_free(m);
    return 0;
}
