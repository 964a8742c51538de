// The driver of a standalone compiled model (`fluidity compile MODEL -o OUT/`): the C API of
// fluidity_model.h over the segments and tables fluidity/codegen/standalone.py generates.
//
// A model is its variables (feeds, parameters, values segments make), its segments in
// order, which variables each reads and writes, and the order of its parameters in a
// combined parameter file (Paddle's save_combine format: LoDTensor records back to back, in
// sorted name order). Loading reads and checks that file once; a handle owns an arena per
// segment (grown on demand) and the current value of each variable. Outputs point into the
// handle's memory and stay valid until its next run. Handles made by fluidity_model_clone
// share the parameters (read-only unless an op updates one in place), so threads each take
// a clone instead of a copy of the weights.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fluidity_model.h"
#include "segment_args.h"
#include "sizes.h"

namespace fl {
namespace model {

enum Kind { FEED = 0, PARAM = 1, VALUE = 2 };

static_assert(FLUIDITY_MAX_DIMS == FL_MAX_DIMS, "the C API's tensors hold the segments' dims");

struct VarInfo {
    const char* name;
    int dtype;            // Paddle VarType code
    int ndim;             // -1: not known from the program
    int64_t dims[FL_MAX_DIMS];   // -1 where the program leaves a dim open
    int kind;
};

struct SegInfo {
    int (*fn)(int64_t*, char*, int64_t, char*);
    int n_in;
    const int* in;        // variable index of each input
    const int* in_lod;    // whether the segment reads the input's LoD
    int n_out;
    const int* out;       // variable index of each output
    const int* out_lod;   // variable index whose LoD the output carries, or -1
    const int* out_inplace;  // 1 for a parameter updated in its own memory
    int n_sites;
    const char* const* sites;  // "op #i 'type' in block b" of each op, by error code - 2
};

struct ModelDef {
    int n_vars;
    const VarInfo* vars;
    int n_segs;
    const SegInfo* segs;
    int n_feeds;
    const int* feeds;
    int n_fetches;
    const int* fetches;
    int n_params;
    const int* params;    // in the combined file's order
};

inline int64_t itemsize(int dtype) {
    switch (dtype) {
        case 0: case 20: case 21: return 1;    // bool, uint8, int8
        case 1: case 4: return 2;              // int16, float16
        case 2: case 5: return 4;              // int32, float32
        case 3: case 6: return 8;              // int64, float64
        default: return 0;
    }
}

inline const char* dtype_name(int dtype) {
    switch (dtype) {
        case 0: return "bool"; case 1: return "int16"; case 2: return "int32";
        case 3: return "int64"; case 4: return "float16"; case 5: return "float32";
        case 6: return "float64"; case 20: return "uint8"; case 21: return "int8";
        default: return "unknown";
    }
}

struct Aligned {          // 64-byte aligned bytes (arena slots and parameters are vectorized)
    char* p = nullptr;
    int64_t cap = 0;
    ~Aligned() { std::free(p); }
    bool reserve(int64_t n) {
        if (n <= cap) return true;
        void* q = nullptr;
        if (posix_memalign(&q, 64, (size_t)(n > 64 ? n : 64)) != 0) return false;
        std::free(p);
        p = (char*)q;
        cap = n;
        return true;
    }
};

struct Params {
    std::vector<Aligned> data;             // by position in ModelDef::params
    std::vector<std::vector<int64_t>> dims;
};

struct Value {
    void* data = nullptr;
    int ndim = -1;                          // -1: no value yet
    int64_t dims[FL_MAX_DIMS] = {0};
    const int64_t* lod = nullptr;
    int64_t lod_len = 0;
};

}  // namespace model
}  // namespace fl

struct fluidity_model {
    const fl::model::ModelDef* def;
    std::shared_ptr<fl::model::Params> params;
    std::vector<fl::model::Value> values;
    std::vector<fl::model::Aligned> arenas;
    std::vector<std::vector<int64_t>> args;
};

namespace fl {
namespace model {

inline void say(char* err, size_t n, const char* fmt, const char* a = "", const char* b = "",
                const char* c = "") {
    if (err && n) std::snprintf(err, n, fmt, a, b, c);
}

// --- the combined parameter file ---------------------------------------------------------
struct Reader {
    const unsigned char* p;
    const unsigned char* end;
    bool take(void* out, size_t n) {
        if ((size_t)(end - p) < n) return false;
        std::memcpy(out, p, n);
        p += n;
        return true;
    }
    bool skip(uint64_t n) {
        if ((uint64_t)(end - p) < n) return false;
        p += n;
        return true;
    }
};

inline bool varint(const unsigned char*& p, const unsigned char* end, uint64_t& v) {
    v = 0;
    for (int shift = 0; p < end && shift < 64; shift += 7) {
        unsigned char byte = *p++;
        v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) return true;
    }
    return false;
}

// A VarType.TensorDesc: data_type (field 1) and dims (field 2, packed or not).
inline bool tensor_desc(const unsigned char* p, const unsigned char* end, int& dtype,
                        std::vector<int64_t>& dims) {
    dtype = -1;
    while (p < end) {
        uint64_t key, v;
        if (!varint(p, end, key)) return false;
        int field = (int)(key >> 3), wire = (int)(key & 7);
        if (wire == 0) {
            if (!varint(p, end, v)) return false;
            if (field == 1) dtype = (int)v;
            else if (field == 2) dims.push_back((int64_t)v);
        } else if (wire == 2) {
            if (!varint(p, end, v) || (uint64_t)(end - p) < v) return false;
            const unsigned char* q = p;
            p += v;
            if (field == 2)
                while (q < p) {
                    uint64_t d;
                    if (!varint(q, p, d)) return false;
                    dims.push_back((int64_t)d);
                }
        } else if (wire == 5) {
            if (end - p < 4) return false;
            p += 4;
        } else if (wire == 1) {
            if (end - p < 8) return false;
            p += 8;
        } else {
            return false;
        }
    }
    return dtype >= 0;
}

inline bool load_params(const ModelDef& def, const char* path, Params& out, char* err,
                        size_t n) {
    FILE* f = std::fopen(path, "rb");
    if (!f) { say(err, n, "%s: cannot open the parameter file", path); return false; }
    std::vector<unsigned char> bytes;
    unsigned char buf[1 << 16];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + got);
    std::fclose(f);
    Reader r{bytes.data(), bytes.data() + bytes.size()};
    out.data.resize(def.n_params);
    out.dims.resize(def.n_params);
    for (int k = 0; k < def.n_params; ++k) {
        const VarInfo& v = def.vars[def.params[k]];
        uint32_t version, tversion;
        uint64_t levels;
        int32_t desc_len;
        bool ok = r.take(&version, 4) && version == 0 && r.take(&levels, 8);
        for (uint64_t l = 0; ok && l < levels; ++l) {
            uint64_t size;
            ok = r.take(&size, 8) && r.skip(size);
        }
        ok = ok && r.take(&tversion, 4) && tversion == 0 && r.take(&desc_len, 4) &&
             desc_len >= 0 && (int64_t)(r.end - r.p) >= desc_len;
        int dtype = -1;
        std::vector<int64_t>& dims = out.dims[k];
        ok = ok && tensor_desc(r.p, r.p + desc_len, dtype, dims);
        if (!ok) {
            say(err, n, "%s: record of parameter '%s' is not a LoDTensor record (truncated "
                "or another format)", path, v.name);
            return false;
        }
        r.p += desc_len;
        if (dtype != v.dtype) {
            say(err, n, "%s: parameter '%s' is %s in the file", path, v.name,
                dtype_name(dtype));
            return false;
        }
        bool same = (int)dims.size() == v.ndim;
        for (int d = 0; same && d < v.ndim; ++d) same = v.dims[d] < 0 || v.dims[d] == dims[d];
        if (!same) {
            say(err, n, "%s: parameter '%s' has other dims in the file than in the program",
                path, v.name);
            return false;
        }
        int64_t bytes_n = itemsize(dtype);
        for (int64_t d : dims) bytes_n *= d;
        if (!out.data[k].reserve(bytes_n) || !r.take(out.data[k].p, (size_t)bytes_n)) {
            say(err, n, "%s: parameter '%s' is cut short", path, v.name);
            return false;
        }
    }
    if (r.p != r.end) {
        say(err, n, "%s: bytes left after the last parameter (a file of another model?)", path);
        return false;
    }
    return true;
}

inline fluidity_model* make(const ModelDef& def, std::shared_ptr<Params> params) {
    auto* m = new fluidity_model;
    m->def = &def;
    m->params = std::move(params);
    m->values.assign(def.n_vars, Value());
    m->arenas.resize(def.n_segs);
    for (int s = 0; s < def.n_segs; ++s)
        m->args.emplace_back(fl_args_len(def.segs[s].n_in, def.segs[s].n_out), 0);
    return m;
}

// --- running -----------------------------------------------------------------------------
inline int run(fluidity_model* m, const fluidity_tensor* inputs, fluidity_tensor* outputs,
               char* err, size_t n) {
    const ModelDef& def = *m->def;
    for (auto& v : m->values) v = Value();
    for (int k = 0; k < def.n_params; ++k) {
        Value& v = m->values[def.params[k]];
        v.data = m->params->data[k].p;
        v.ndim = (int)m->params->dims[k].size();
        for (int d = 0; d < v.ndim; ++d) v.dims[d] = m->params->dims[k][d];
    }
    for (int k = 0; k < def.n_feeds; ++k) {
        const VarInfo& info = def.vars[def.feeds[k]];
        const fluidity_tensor& t = inputs[k];
        if (t.dtype != info.dtype) {
            say(err, n, "input '%s' is %s; the model takes %s", info.name, dtype_name(t.dtype),
                dtype_name(info.dtype));
            return 1;
        }
        int64_t numel = 1;      // a 0-D tensor holds one element: it needs data too
        int sane = 1;
        for (int d = 0; d < t.ndim && d < FL_MAX_DIMS; ++d)
            numel = fl_mul_checked(numel, t.dims[d], &sane);
        if (!sane) {
            say(err, n, "input '%s' has negative dims or more elements than int64 counts",
                info.name);
            return 1;
        }
        if (t.ndim < 0 || t.ndim > FL_MAX_DIMS || (t.data == nullptr && numel != 0)) {
            say(err, n, "input '%s' has no data or more than %s dims", info.name,
                std::to_string(FL_MAX_DIMS).c_str());
            return 1;
        }
        Value& v = m->values[def.feeds[k]];
        v.data = t.data;
        v.ndim = t.ndim;
        for (int d = 0; d < t.ndim; ++d) v.dims[d] = t.dims[d];
        v.lod = t.lod;
        v.lod_len = t.lod_len;
    }
    char msg[512];
    for (int s = 0; s < def.n_segs; ++s) {
        const SegInfo& seg = def.segs[s];
        int64_t* P = m->args[s].data();
        fl_tensor_arg* const ins = fl_inputs(P);
        for (int j = 0; j < seg.n_in; ++j) {
            const Value& v = m->values[seg.in[j]];
            const char* name = def.vars[seg.in[j]].name;
            if (v.ndim < 0) {
                say(err, n, "'%s' has no value when the model reads it", name);
                return 1;
            }
            fl_tensor_arg& a = ins[j];
            a.data = (int64_t)(intptr_t)v.data;
            a.ndim = v.ndim;
            for (int d = 0; d < v.ndim; ++d) a.dims[d] = v.dims[d];
            if (seg.in_lod[j]) {
                if (!v.lod || v.lod_len < 1) {
                    say(err, n, "input '%s' needs its LoD (level-0 offsets)", name);
                    return 1;
                }
                a.aux = (int64_t)(intptr_t)v.lod;
                a.aux_len = v.lod_len;
            }
        }
        Aligned& arena = m->arenas[s];
        int rc;
        while ((rc = seg.fn(P, arena.p, arena.cap, msg)) == 1)
            if (!arena.reserve(P[FL_ARG_NEED])) {
                say(err, n, "out of memory for the arena of segment %s", std::to_string(s).c_str());
                return 1;
            }
        if (rc == -1) {
            say(err, n, "inputs of other shapes than the model was compiled for: %s", msg);
            return 1;
        }
        if (rc) {
            const char* site = 2 <= rc && rc - 2 < seg.n_sites ? seg.sites[rc - 2] : "an op";
            say(err, n, "%s failed: %s", site, msg);
            return 1;
        }
        const fl_tensor_arg* const outs = fl_outputs(P, seg.n_in);
        for (int j = 0; j < seg.n_out; ++j) {
            const fl_tensor_arg& o = outs[j];
            if (seg.out_inplace[j] || o.ndim < 0) continue;   // in place, or not written
            Value& v = m->values[seg.out[j]];
            v.data = arena.p + o.data;
            v.ndim = (int)o.ndim;
            for (int d = 0; d < v.ndim; ++d) v.dims[d] = o.dims[d];
            if (seg.out_lod[j] >= 0) {
                v.lod = m->values[seg.out_lod[j]].lod;
                v.lod_len = m->values[seg.out_lod[j]].lod_len;
            } else {
                v.lod = nullptr;
                v.lod_len = 0;
            }
        }
    }
    for (int k = 0; k < def.n_fetches; ++k) {
        const Value& v = m->values[def.fetches[k]];
        if (v.ndim < 0) {
            say(err, n, "output '%s' was not computed", def.vars[def.fetches[k]].name);
            return 1;
        }
        fluidity_tensor& t = outputs[k];
        t.dtype = def.vars[def.fetches[k]].dtype;
        t.ndim = v.ndim;
        for (int d = 0; d < v.ndim; ++d) t.dims[d] = v.dims[d];
        t.data = v.data;
        t.lod = v.lod;
        t.lod_len = v.lod_len;
    }
    return 0;
}

}  // namespace model
}  // namespace fl

// --- the C API (fluidity_model.h); the generated file defines fl_model_def ----------------
extern const fl::model::ModelDef fl_model_def;

extern "C" {

int fluidity_model_num_inputs(void) { return fl_model_def.n_feeds; }
int fluidity_model_num_outputs(void) { return fl_model_def.n_fetches; }

const char* fluidity_model_input_name(int i) {
    return 0 <= i && i < fl_model_def.n_feeds ? fl_model_def.vars[fl_model_def.feeds[i]].name
                                              : nullptr;
}

const char* fluidity_model_output_name(int i) {
    return 0 <= i && i < fl_model_def.n_fetches
               ? fl_model_def.vars[fl_model_def.fetches[i]].name : nullptr;
}

int fluidity_model_input_dtype(int i) {
    return 0 <= i && i < fl_model_def.n_feeds ? fl_model_def.vars[fl_model_def.feeds[i]].dtype
                                              : -1;
}

fluidity_model* fluidity_model_load(const char* params_path, char* err, size_t err_len) {
    auto params = std::make_shared<fl::model::Params>();
    if (!fl::model::load_params(fl_model_def, params_path, *params, err, err_len))
        return nullptr;
    return fl::model::make(fl_model_def, std::move(params));
}

fluidity_model* fluidity_model_clone(const fluidity_model* m) {
    return m ? fl::model::make(*m->def, m->params) : nullptr;
}

int fluidity_model_run(fluidity_model* m, const fluidity_tensor* inputs,
                       fluidity_tensor* outputs, char* err, size_t err_len) {
    if (!m) {
        fl::model::say(err, err_len, "no model (fluidity_model_load failed?)");
        return 1;
    }
    return fl::model::run(m, inputs, outputs, err, err_len);
}

void fluidity_model_free(fluidity_model* m) { delete m; }

}  // extern "C"
