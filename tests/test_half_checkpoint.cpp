// SPDX-License-Identifier: Apache-2.0
// safetensors BF16 and F16: every one of the 65536 patterns of each type (NaN payloads, -0,
// subnormals, Inf) saved and reloaded bit for bit, the header naming the dtypes as the format
// does, and a file written by Python (tests/fixtures/make_half_safetensors.py, standard library
// only) loaded and compared with values and bit patterns written out here.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "engine/core/views.h"
#include "helpers/bytes.h"
#include "helpers/datasets.h"
#include "helpers/half_bits.h"

using namespace anvil;
using test::bits_of;

TEST_CASE("safetensors saves and reloads every bf16 and f16 pattern bit for bit",
          "[checkpoint][half]") {
  test::ScratchDir dir("half_ckpt");
  const std::string path = dir.file("half.safetensors");
  const Tensor bf = test::all_half_patterns(DType::bf16), hf = test::all_half_patterns(DType::f16);
  const Tensor view = raw::transpose(bf, 0, 1);  // a strided view is saved densely
  save_safetensors(path, {{"bf16", bf}, {"f16", hf}, {"bf16_t", view}});
  // The header names the dtypes as the format spells them.
  const std::string text = test::read_file(path);
  CHECK(text.find(R"("dtype":"BF16")") != std::string::npos);
  CHECK(text.find(R"("dtype":"F16")") != std::string::npos);
  const SafetensorsFile f = load_safetensors(path);
  REQUIRE(f.tensors.size() == 3);
  CHECK(f.at("bf16").dtype() == DType::bf16);
  CHECK(f.at("f16").dtype() == DType::f16);
  CHECK(f.at("bf16").sizes() == Shape{256, 256});
  CHECK(test::tensor_bytes(f.at("bf16")) == test::tensor_bytes(bf));
  CHECK(test::tensor_bytes(f.at("f16")) == test::tensor_bytes(hf));
  CHECK(bits_of(f.at("bf16_t")) == bits_of(view));
  CHECK(bits_of(f.at("bf16_t"))[1] == 256);  // element [0, 1] of the transpose
}

TEST_CASE("a safetensors file written by Python with BF16 and F16 tensors loads",
          "[checkpoint][half]") {
  const std::string path =
      std::string(ANVIL_TEST_FIXTURES_DIR) + "/half_safetensors/half.safetensors";
  const SafetensorsFile f = load_safetensors(path);
  CHECK(f.metadata.at("writer") == "make_half_safetensors.py");
  REQUIRE(f.tensors.size() == 3);

  const Tensor& bf = f.at("bf16");
  CHECK(bf.dtype() == DType::bf16);
  CHECK(bf.sizes() == Shape{6});
  // 1.0, -2.5, 1/3, 1e-40, +inf, -0.0, rounded to nearest even by the Python script.
  CHECK(bits_of(bf) == std::vector<std::uint16_t>{0x3F80, 0xC020, 0x3EAB, 0x0001, 0x7F80, 0x8000});
  const std::vector<double> bf_values = {1.0,      -2.5, 0.333984375, std::ldexp(1.0, -133),
                                         INFINITY, -0.0};
  for (std::int64_t i = 0; i < 6; ++i) CHECK(bf.select(0, i).item() == bf_values[i]);
  CHECK(std::signbit(bf.select(0, 5).item()));

  const Tensor& hf = f.at("f16");
  CHECK(hf.dtype() == DType::f16);
  CHECK(hf.sizes() == Shape{2, 3});
  // 0.1, -65504, 2^-24, 0.5, 1/3, 2^-14.
  CHECK(bits_of(hf) == std::vector<std::uint16_t>{0x2E66, 0xFBFF, 0x0001, 0x3800, 0x3555, 0x0400});
  const std::vector<double> hf_values = {
      0.0999755859375, -65504.0, std::ldexp(1.0, -24), 0.5, 0.333251953125, std::ldexp(1.0, -14)};
  const Tensor h32 = hf.to(DType::f32);
  for (std::int64_t i = 0; i < 6; ++i) CHECK(h32.data<float>()[i] == hf_values[i]);

  // anvil's own converters give the same patterns as the script's.
  CHECK(bits_of(Tensor::from_vector(
                    std::vector<float>{1.0f, -2.5f, 1.0f / 3.0f, 1e-40f, INFINITY, -0.0f}, {6})
                    .to(DType::bf16)) == bits_of(bf));
  CHECK(bits_of(Tensor::from_vector(std::vector<double>{0.1, -65504.0, std::ldexp(1.0, -24), 0.5,
                                                        1.0 / 3.0, std::ldexp(1.0, -14)},
                                    {2, 3})
                    .to(DType::f16)) == bits_of(hf));
  CHECK(f.at("f32").dtype() == DType::f32);
  CHECK(f.at("f32").select(0, 1).item() == -3.0);
}
