// Bad input: a clear std::invalid_argument naming the problem, before any work.
#include <gtest/gtest.h>

#include "kernels/attention.hpp"
#include "tests/kernels/reference.hpp"

namespace rm::kernels {
namespace {

void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TileLayout layout(int n) { return {test::iota_pos(0, n), test::iota_pos(0, n), n, true}; }

TEST(Validation, Shapes) {
  expect_error([] { make_plan({2, 2, 96, 4, 4}, layout(4), {}); }, "head_dim 96");
  expect_error([] { make_plan({3, 2, 64, 4, 4}, layout(4), {}); }, "not a multiple of heads_kv");
  expect_error([] { make_plan({2, 2, 64, 5, 4}, layout(4), {}); }, "q_pos has 4 entries, rows_q is 5");
  expect_error([] { make_plan({2, 2, 64, 4, 3}, layout(4), {}); }, "k_pos has 4");
  TileLayout l = layout(4);
  l.q_pos[2] = 9;
  expect_error([&] { make_plan({1, 1, 64, 4, 4}, l, {}); }, "q_pos[2] = 9");
}

TEST(Validation, Indices) {
  SparseIndex vs;
  vs.mode = SparseMode::vertical_slash;
  vs.vertical_slash.push_back({{3, 1}, {0}});
  expect_error([&] { make_plan({1, 1, 64, 4, 4}, layout(4), vs); }, "head 0 verticals is not sorted");
  vs.vertical_slash[0] = {{1}, {0, 4}};
  expect_error([&] { make_plan({1, 1, 64, 4, 4}, layout(4), vs); }, "slashes[1] = 4 is outside");
  vs.vertical_slash[0] = {{}, {0}};
  expect_error([&] { make_plan({2, 1, 64, 4, 4}, layout(4), vs); }, "index has 1 heads");
  TileLayout dup = layout(4);
  dup.k_pos[1] = 0;
  expect_error([&] { make_plan({1, 1, 64, 4, 4}, dup, vs); }, "repeats a position");
  SparseIndex bm;
  bm.mode = SparseMode::block_mask;
  bm.block_mask.push_back({{{0}, {1}}});
  expect_error([&] { make_plan({1, 1, 64, 4, 4}, layout(4), bm); }, "seq_len needs 1");
  bm.block_mask[0].rows = {{2}};
  expect_error([&] { make_plan({1, 1, 64, 4, 4}, layout(4), bm); }, "row 0[0] = 2 is outside");
}

TEST(Validation, Tensors) {
  const TilePlan plan = make_plan({2, 1, 64, 4, 4}, layout(4), {});
  std::vector<float> q(2 * 4 * 64), kv(4 * 64), out(q.size()), lse(8), small(3);
  std::vector<std::uint16_t> kb(kv.size());
  expect_error([&] { make_forward_params(plan, tensor(small), tensor(kv), tensor(kv), out, lse); }, "q has 3 elements");
  expect_error([&] { make_forward_params(plan, tensor(q), tensor(kb), tensor(kv), out, lse); }, "same dtype");
  expect_error([&] { make_forward_params(plan, tensor(q), tensor(kv), tensor(kv), out, small); }, "lse has 3");
  expect_error([&] { make_forward_params(plan, {nullptr, q.size(), DType::f32}, tensor(kv), tensor(kv), out, lse); },
               "q is missing");
  expect_error([&] { make_forward_params(plan, tensor(q), tensor(kv), tensor(kv), out, lse, -1.f); }, "softmax_scale");
  std::vector<float> dq(q.size()), dk(kv.size()), dv(kv.size());
  expect_error([&] {
    make_backward_params(plan, tensor(q), tensor(kv), tensor(kv), tensor(kb), out, lse, dq, dk, dv, false);
  }, "dout has");
  EXPECT_NO_THROW(make_backward_params(plan, tensor(q), tensor(kv), tensor(kv), tensor(q), out, lse, dq, dk, dv, false));
}

}  // namespace
}  // namespace rm::kernels
