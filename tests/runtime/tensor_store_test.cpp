#include "runtime/tensor_store.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

namespace rm::runtime {
namespace {

using schedule::Instances;

TEST(TensorStore, EveryCopyOfEveryBufferOfTheRankZeroedAndAligned) {
  schedule::Schedule s;
  s.buffers = {{0, 0, "a", schedule::BufferRole::q, schedule::DType::bf16, {3, 5}, Instances::one},
               {1, 1, "b", schedule::BufferRole::q, schedule::DType::fp32, {7}, Instances::one},
               {2, 0, "c", schedule::BufferRole::kv, schedule::DType::fp32, {2, 3}, Instances::per_layer},
               {3, 0, "d", schedule::BufferRole::kv_slot, schedule::DType::int32, {5}, Instances::per_pass}};
  EXPECT_EQ(memory_needed(s, 0, 3), 64 + 128 + 64);  // each buffer's copies together, rounded up to 64 bytes
  TensorStore st(s, 0, 3);
  EXPECT_EQ(st.total_bytes(), memory_needed(s, 0, 3));
  EXPECT_EQ(st.bytes(0, 0).size(), 30u);
  EXPECT_EQ(st.bytes(2, 1).size(), 24u);
  EXPECT_EQ(st.bytes(2, -1).size(), 72u);  // every layer's copy, contiguous
  EXPECT_EQ(st.bytes(2, 1).data(), st.bytes(2, 0).data() + 24);
  EXPECT_EQ(st.bytes(3, -1).size(), 40u);
  for (int b : {0, 2, 3}) {
    auto all = st.bytes(b, -1);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(all.data()) % 64, 0u) << b;
    EXPECT_TRUE(std::all_of(all.begin(), all.end(), [](std::byte x) { return x == std::byte{0}; })) << b;
  }
  EXPECT_THROW(st.bytes(1, 0), std::out_of_range);  // rank 1's
  EXPECT_THROW(st.bytes(0, 1), std::out_of_range);  // one copy only
  EXPECT_THROW(st.bytes(9, 0), std::out_of_range);
}

}  // namespace
}  // namespace rm::runtime
