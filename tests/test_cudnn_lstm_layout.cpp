// SPDX-License-Identifier: Apache-2.0
// The parameter mapping and descriptor settings of the cuDNN LSTM variant, on the CPU (Note
// [cuDNN LSTM weight space], kernels/cuda/cudnn_lstm_layout.h): every element of w_ih, w_hh,
// b_ih (and b_hh) belongs to exactly one block, blocks follow cuDNN's linLayerID gate order
// (i, f, g, o; input side 0..3, recurrent 4..7), the single-bias layout leaves the recurrent
// biases out, and the descriptor values match the problem.
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "kernels/cuda/cudnn_lstm_layout.h"

using namespace anvil::cuda;

TEST_CASE("cuDNN LSTM blocks tile anvil's parameters in cuDNN's gate order", "[cudnn][lstm]") {
  for (bool two : {false, true})
    for (auto [I, H] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{3, 5}, {256, 256}, {32, 100}}) {
      INFO("I=" << I << " H=" << H << " biases=" << (two ? 2 : 1));
      const auto blocks = cudnn_lstm_blocks(I, H, two);
      CHECK(blocks.size() == (two ? 16u : 12u));
      std::map<LstmParam, std::vector<int>> covered;
      covered[LstmParam::w_ih].assign(4 * H * I, 0);
      covered[LstmParam::w_hh].assign(4 * H * H, 0);
      covered[LstmParam::b_ih].assign(4 * H, 0);
      covered[LstmParam::b_hh].assign(4 * H, 0);
      for (const auto& b : blocks) {
        // Gate order: ID k and k+4 are the same gate, at the same row block of w_ih / w_hh.
        const int gate = b.lin_layer_id % 4;
        if (!b.bias) {
          const std::int64_t cols = b.lin_layer_id < 4 ? I : H;
          CHECK(b.param == (b.lin_layer_id < 4 ? LstmParam::w_ih : LstmParam::w_hh));
          CHECK(b.offset == gate * H * cols);
          CHECK(b.count == H * cols);
        } else {
          CHECK(b.param == (b.lin_layer_id < 4 ? LstmParam::b_ih : LstmParam::b_hh));
          CHECK(b.offset == gate * H);
          CHECK(b.count == H);
        }
        auto& c = covered[b.param];
        for (std::int64_t e = b.offset; e < b.offset + b.count; ++e)
          ++c[static_cast<std::size_t>(e)];
      }
      for (auto p : {LstmParam::w_ih, LstmParam::w_hh, LstmParam::b_ih})
        for (int n : covered[p]) REQUIRE(n == 1);
      for (int n : covered[LstmParam::b_hh]) REQUIRE(n == (two ? 1 : 0));
    }
}

TEST_CASE("cuDNN LSTM descriptor settings follow the problem", "[cudnn][lstm]") {
  CudnnLstmConfig c;
  REQUIRE(cudnn_lstm_config(32, 128, 256, 200, false, false, &c));
  CHECK(c.input_size == 256);
  CHECK(c.hidden_size == 200);
  CHECK(c.proj_size == 200);
  CHECK(c.num_layers == 1);
  CHECK_FALSE(c.double_bias);
  CHECK_FALSE(c.f64);
  CHECK_FALSE(c.tf32);  // IEEE FP32 by default
  CHECK(c.max_seq_length == 32);
  CHECK(c.batch == 128);
  CHECK(c.h_dims[0] == 1);
  CHECK(c.h_dims[1] == 128);
  CHECK(c.h_dims[2] == 200);
  CHECK(c.h_strides[0] == 128 * 200);
  CHECK(c.h_strides[1] == 200);
  CHECK(c.h_strides[2] == 1);
  REQUIRE(cudnn_lstm_config(1, 1, 1, 1, true, true, &c));
  CHECK(c.double_bias);
  CHECK(c.f64);
  // Sizes beyond cuDNN's int arguments are refused.
  CHECK_FALSE(cudnn_lstm_config(1, 1, std::int64_t{1} << 31, 1, false, false, &c));
  CHECK_FALSE(cudnn_lstm_config(1, 1, 40000, 40000, false, false, &c));  // 4H(I+H) > 2^31
}
