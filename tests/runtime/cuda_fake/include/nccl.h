// A host stand-in for NCCL (tests/runtime/cuda_fake): the calls of the runtime's cuda
// backend, carried by MPI on the fake device (fake_device.cpp).
#pragma once
#include <cstddef>
#include "cuda_runtime_api.h"

enum ncclResult_t { ncclSuccess = 0, ncclInvalidUsage = 5, ncclInProgress = 7 };
enum ncclDataType_t { ncclInt32 = 2, ncclUint8 = 1, ncclFloat32 = 7, ncclBfloat16 = 9 };
enum ncclRedOp_t { ncclSum = 0 };
struct ncclComm;
using ncclComm_t = ncclComm*;
struct ncclUniqueId {
  char internal[128];
};
const char* ncclGetErrorString(ncclResult_t r);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
ncclResult_t ncclCommInitRank(ncclComm_t* c, int n, ncclUniqueId id, int rank);
ncclResult_t ncclCommAbort(ncclComm_t c);
ncclResult_t ncclCommDestroy(ncclComm_t c);
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* r);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
ncclResult_t ncclSend(const void* b, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s);
ncclResult_t ncclRecv(void* b, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s);
ncclResult_t ncclAllReduce(const void* in, void* out, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t s);
ncclResult_t ncclAllGather(const void* in, void* out, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t s);
ncclResult_t ncclReduceScatter(const void* in, void* out, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                               cudaStream_t s);
ncclResult_t ncclBroadcast(const void* in, void* out, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t s);
