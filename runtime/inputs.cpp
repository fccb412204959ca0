#include "runtime/inputs.hpp"

#include <cstring>
#include <map>
#include <stdexcept>

#include "kernels/bf16.hpp"
#include "runtime/wire.hpp"
#include "runtime/seed.hpp"

namespace rm::runtime {

using schedule::BufferRole;
using schedule::DType;

namespace {

// First access of each buffer in op id order: op, and whether it reads it.
struct FirstUse {
  schedule::OpId op = -1;
  bool read = false;
};

void put(std::span<std::byte> buf, DType t, int64_t i, float v) {
  if (t == DType::fp32) reinterpret_cast<float*>(buf.data())[i] = v;
  else reinterpret_cast<kernels::bf16_bits*>(buf.data())[i] = kernels::to_bf16(v);
}
float get(std::span<const std::byte> buf, DType t, int64_t i) {
  if (t == DType::fp32) return reinterpret_cast<const float*>(buf.data())[i];
  return kernels::from_bf16(reinterpret_cast<const kernels::bf16_bits*>(buf.data())[i]);
}

}  // namespace

void seed_inputs(const schedule::Schedule& s, const Layouts& l, TensorStore& store,
                 uint64_t seed) {
  std::vector<FirstUse> first(s.buffers.size());
  for (const auto& op : s.ops) {
    if (op.rank != store.rank()) continue;
    const schedule::Access* a = s.access_of(op);
    if (!a) continue;
    for (int b : a->reads)
      if (first[size_t(b)].op < 0) first[size_t(b)] = {op.id, true};
    for (int b : a->writes)
      if (first[size_t(b)].op < 0) first[size_t(b)] = {op.id, false};
  }
  const int64_t B = l.batch(), D = l.head_dim();
  for (const auto& buf : s.buffers) {
    const Layout* lay = l.of(buf.id);
    if (buf.rank != store.rank() || !lay || !first[size_t(buf.id)].read) continue;
    InputTensor t0;
    switch (lay->content) {
      case BufferRole::q: t0 = InputTensor::q; break;
      case BufferRole::kv: t0 = InputTensor::k; break;
      case BufferRole::d_o: t0 = InputTensor::d_o; break;
      default: continue;
    }
    // Every copy (per-layer inputs hold the same values in each layer).
    auto all = store.bytes(buf.id, -1);
    const int64_t one = buf.bytes();
    for (int64_t c = 0; c * one < int64_t(all.size()); ++c) {
      auto data = all.subspan(size_t(c * one), size_t(one));
      const int parts = lay->kv_like() ? 2 : 1;
      for (int part = 0; part < parts; ++part) {
        const InputTensor t = part == 1 ? InputTensor::v : t0;
        for (int64_t b = 0; b < B; ++b)
          for (size_t h = 0; h < lay->heads.size(); ++h)
            for (size_t k = 0; k < lay->tokens.size(); ++k) {
              const int64_t row = lay->row(part, b, int64_t(h), int64_t(k), B);
              for (int64_t d = 0; d < D; ++d)
                put(data, buf.dtype, row * D + d, input_value(seed, t, b, lay->tokens[k], lay->heads[h], d));
            }
      }
    }
  }
}

std::vector<OutputSlice> read_outputs(const schedule::Schedule& s, const Layouts& l, const BufferInstances& in,
                                      TensorStore& store) {
  // content -> (buffer, its last writer)
  std::map<BufferRole, std::pair<int, schedule::OpId>> last;
  for (const auto& op : s.ops) {
    if (op.rank != store.rank()) continue;
    const schedule::Access* a = s.access_of(op);
    if (!a) continue;
    for (int b : a->writes) {
      const Layout* lay = l.of(b);
      if (!lay) continue;
      const BufferRole c = lay->content;
      if (c == BufferRole::o || c == BufferRole::lse || c == BufferRole::dq || c == BufferRole::dkv) last[c] = {b, op.id};
    }
  }
  std::vector<OutputSlice> out;
  for (const auto& [content, where] : last) {
    const auto [b, op] = where;
    const schedule::Buffer& buf = s.buffers[size_t(b)];
    auto data = store.bytes(b, in.copy(op, b));
    OutputSlice slice{store.rank(), *l.of(b), {}};
    slice.values.resize(size_t(buf.elements()));
    for (int64_t i = 0; i < buf.elements(); ++i) slice.values[size_t(i)] = get(data, buf.dtype, i);
    out.push_back(std::move(slice));
  }
  return out;
}

using wire::append;
using wire::append_vec;

std::string pack(const std::vector<OutputSlice>& slices) {
  std::string s;
  append(s, int64_t(slices.size()));
  for (const auto& x : slices) {
    append(s, int32_t(x.rank));
    append(s, uint8_t(x.layout.content));
    append_vec(s, x.layout.tokens);
    append_vec(s, x.layout.heads);
    append_vec(s, x.values);
  }
  return s;
}

std::vector<OutputSlice> unpack_outputs(std::string_view bytes) {
  wire::Reader r{bytes, "output slices"};
  const auto n = r.take<int64_t>();
  if (n < 0 || n > 1 << 20) throw std::runtime_error("output slices: bad count");
  std::vector<OutputSlice> out;
  for (int64_t i = 0; i < n; ++i) {
    OutputSlice x;
    x.rank = r.take<int32_t>();
    x.layout.content = BufferRole(r.take<uint8_t>());
    x.layout.tokens = r.take_vec<int32_t>();
    x.layout.heads = r.take_vec<int32_t>();
    x.values = r.take_vec<float>();
    out.push_back(std::move(x));
  }
  return out;
}

}  // namespace rm::runtime
