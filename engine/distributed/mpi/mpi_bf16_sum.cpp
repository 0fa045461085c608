// SPDX-License-Identifier: Apache-2.0
// The MPI reduction of bf16 gradient buckets (Note [bf16 gradient buckets] in
// engine/distributed/data_parallel.h): a user MPI_Op that adds each pair of bf16 values in f32
// and rounds the sum once to bf16 (nearest even), and the choice of MPI_Op per dtype and
// operation for the communicator's all-reduces (libnbc, chunked and ring alike).
#include <mpi.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/core/half_types.h"

namespace anvil::dist {

namespace {

// Note [bf16 summing MPI_Op]
// MPI has no bf16 type and no predefined reduction for one, so the bf16 elements travel as
// MPI_UINT16_T (two opaque bytes) and this user function reduces them: inout[i] = bf16(f32(in[i])
// + f32(inout[i])). Both operands have 8 significant bits and f32 has 24 (at least 2 x 8 + 2),
// so the f32 addition rounded to bf16 equals the exact sum rounded once to bf16 (no double
// rounding); the result is what NCCL's ncclBfloat16 sum computes on a GPU. The function is
// commutative (MPI_Op_create's commute = 1, so Open MPI may reorder operands) but, like every
// floating sum, not associative: beyond 2 ranks the bits depend on the algorithm's order, as
// for f32. MPI calls it with whatever the datatype was; only MPI_UINT16_T is ever passed with it
// (mpi_reduce_op below), and the count is in elements.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  const int n = *len;
  for (int i = 0; i < n; ++i)
    b[i] =
        BFloat16(BFloat16::from_bits(a[i]).to_float() + BFloat16::from_bits(b[i]).to_float()).bits;
}

MPI_Op g_bf16_sum = MPI_OP_NULL;

}  // namespace

// After MPI_Init (MpiCommunicator's constructor), before any collective.
void create_bf16_sum_op() {
  if (g_bf16_sum != MPI_OP_NULL) return;
  const int rc = MPI_Op_create(&bf16_sum, 1, &g_bf16_sum);
  ANVIL_CHECK(rc == MPI_SUCCESS, "mpi", "MPI_Op_create of the bf16 sum failed (error ", rc, ")");
}

// Before MPI_Finalize, once no collective uses it any more.
void free_bf16_sum_op() {
  if (g_bf16_sum != MPI_OP_NULL) MPI_Op_free(&g_bf16_sum);
}

// The reduction of an all-reduce of `d` elements: MPI_MAX or MPI_SUM, and for bf16 (sum only,
// check_all_reduce) the user op above.
MPI_Op mpi_reduce_op(DType d, bool max) {
  if (d != DType::bf16) return max ? MPI_MAX : MPI_SUM;
  ANVIL_CHECK(!max && g_bf16_sum != MPI_OP_NULL, "mpi",
              "bf16 all-reduce: only sum, through the bf16 sum op");
  return g_bf16_sum;
}

}  // namespace anvil::dist
