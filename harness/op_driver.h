// SPDX-License-Identifier: Apache-2.0
#pragma once
// Op drivers: for one variant table, everything a test, a benchmark or a command-line run needs
// to use it on a device (issue 32, point 1): its problems (from a model, a named group or a
// descriptor), inputs made on the problem's device from a seed, a named variant run on them,
// the `ref` answer, the tolerance per variant and dtype, and the FLOP and byte counts.
//
// Note [Op drivers]
// A driver owns the knowledge of its table's arguments; its consumers own none of it. The tests
// loop over driver x device x variant x problem (tests/test_op_drivers.cpp and the GPU one), and
// a new variant or a new table with a driver is picked up without touching them.
// * A problem names one pass (ConvProblem::pass, PoolProblem::pass, ...). passes() lists the
//   passes a driver checks for a problem a model lists (a conv layer's forward, backward-data
//   and backward-weights).
// * make_case() draws the inputs on the problem's device from the seed (a backward pass also
//   gets its output gradient). The ref answer is `ref` run on the host in f64 on the same,
//   dtype-rounded, values; it is computed once per case, on the first check(). A driver whose
//   variants cannot match that says what it checks instead at the top of its file (embedding:
//   ref's bits in the problem's dtype; dropout: ref's mask for the variants of ref's stream).
// * A case runs one variant at a time: prepare(v) does what the timed call needs first (the
//   training forward whose saved state a backward pass reads) and fills the outputs with NaN, so
//   an element a variant forgets to write fails; run() is the call a benchmark times (on a GPU
//   it only enqueues); check() compares the outputs with ref.
// * The bound: check() fails when max |got - ref| / max(1, max |ref|) exceeds
//   tolerance(variant, dtype) x the case's error growth (the square root of the pass's longest
//   reduction). tolerance() is a few units of the dtype's rounding (of TF32's for the variants
//   that use it), more for variants that lose bits by design (winograd).
//
// Note [Sampled checks]
// ref runs the whole pass in f64 on one core: for a model layer at its training batch (a VGG16
// or ResNet-50 convolution at batch 16) that is minutes, which the kernel benchmarks, validating
// every variant before timing it, cannot spend. check_sampled(n) compares n output entries
// instead (always the first and the last, the rest from a fixed seed), each recomputed from the
// op's definition in f64, with check()'s bound scaled by the sampled entries' magnitude. A
// wrong layout or a dropped tail shows on most entries; a fault confined to a few entries can
// pass, which the full check of the driver loop tests (on smaller problems) catches. The conv2d
// driver has one; the other drivers' full ref costs about what their pass costs.
// Adding an op: a problem, its kernels and one driver file in harness/drivers/
// (docs/architecture.md, "How to add an op").
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/dispatch/op_problem.h"
#include "engine/dispatch/selection.h"
#include "engine/dispatch/variant_table.h"
#include "engine/nn/module.h"

namespace anvil::harness {

// One problem's inputs and outputs on its device (Note [Op drivers]).
class OpCase {
 public:
  virtual ~OpCase() = default;
  // Gets `variant` ready to run (the forward a backward pass reads, outputs filled with NaN).
  // Throws when the variant cannot run the problem.
  virtual void prepare(const std::string& variant) = 0;
  // One call of the prepared variant (enqueued on a GPU).
  virtual void run() = 0;
  // "" when the outputs of the last run() are within the bound of ref's, else what differs.
  virtual std::string check() = 0;
  // check() on `entries` output entries, each recomputed from the op's definition in f64, for
  // problems whose full ref would take minutes (Note [Sampled checks]). A case without a cheaper
  // check runs check().
  virtual std::string check_sampled(int entries) {
    (void)entries;
    return check();
  }
};

class OpDriver {
 public:
  virtual ~OpDriver() = default;
  // The table's op name ("gemm", "conv2d", "max_pool2d", ...).
  virtual std::string op() const = 0;
  virtual const VariantTableBase& table() const = 0;
  // Whether each variant of the table supports `p`, in the table's order (a device mismatch is a
  // reason too). p must be this driver's problem type.
  virtual std::vector<Candidate> candidates(const OpProblem& p) const = 0;
  // The variant the table selects for `p` without forcing (Note [Variant selection]).
  virtual std::string select(const OpProblem& p) const = 0;
  // select(p) with autotune's trials run on `c` (made for p) through time_trial(): with autotune
  // on, the tuned winner (Note [Autotune trials]); an op that does not autotune selects as
  // select(p) does.
  virtual std::string select_tuned(const OpProblem& p, OpCase& c) const = 0;

  // The named groups of problems (on the CPU, f32) and one of them; an unknown name throws.
  virtual std::vector<std::string> groups() const = 0;
  virtual std::vector<nn::NamedProblem> group(const std::string& name) const = 0;
  // The passes a problem's layer runs, each its own problem (Note [Op drivers]).
  virtual std::vector<OpProblem> passes(const OpProblem& p) const = 0;

  // Inputs of `p` on p's device from `seed`.
  virtual std::unique_ptr<OpCase> make_case(const OpProblem& p, std::uint64_t seed) const = 0;
  // Bound per unit of a case's error growth (Note [Op drivers]).
  virtual double tolerance(const std::string& variant, DType dtype) const = 0;
  // The (problem, pass) pairs of the group every non-ref variant of a device must run: fewer
  // fails the loop tests (tests/helpers/variant_tally.h).
  virtual int minimum_problems(const std::string& group, DeviceType device) const = 0;

  // FLOPs and bytes of one run of p: the problem's own flops() and bytes() where its type has
  // them; the drivers of the memory-bound tables count them themselves.
  virtual double flops(const OpProblem& p) const;
  virtual double bytes(const OpProblem& p) const;
};

// Every driver, one per table that has one; find_driver returns null for a table without.
const std::vector<const OpDriver*>& drivers();
const OpDriver* find_driver(const std::string& op);

// The problems of `driver`'s table among models::problems(model, batch), named as the model
// names them ("resnet50:layer1.0.conv1"), duplicates removed.
std::vector<nn::NamedProblem> model_problems(const OpDriver& driver, const std::string& model,
                                             std::int64_t batch);
// Problems from a source: "model:<name>" (at the model's CPU batch), "group:<name>" or a
// descriptor of the driver's op (harness/problem_descriptor.h).
std::vector<nn::NamedProblem> problems_from(const OpDriver& driver, const std::string& source);

// What of the op a problem runs, as the kernel benchmarks name it: the pass of the tables that
// have passes ("forward", "backward_data", ...; a conv forward with a fused relu is
// "forward_relu"), the operation of the others ("add", "sum", "cross_entropy_forward", "step").
std::string pass_label(const OpProblem& p);

// The same problem on another device.
OpProblem on_device(OpProblem p, const Device& device);

// Machine epsilon of f32 or f64; for the variants that round operands to TF32, the error of a
// product of two rounded operands (2 x 2^-11).
double rounding_of(const std::string& variant, DType dtype);

}  // namespace anvil::harness
