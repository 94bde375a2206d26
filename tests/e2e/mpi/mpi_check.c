/* mpi_check: a two-rank MPI program whose every received byte is checked.
 *
 *   mpi_check [ITERS [MAX_BYTES]]
 *
 * Ping-pong between rank 0 and rank 1 at several message sizes (eager and rendezvous sizes
 * of pml ucx), each message filled with a pattern that depends on the size, the iteration
 * and the sender, checked byte for byte by the receiver; then MPI_Allreduce (sum and max of
 * int64 vectors whose result each rank computes on its own), MPI_Bcast and MPI_Alltoall.
 * Exits 0 only if every check passed on every rank; prints one line per phase and a final
 * "mpi_check: ok" from rank 0. MAX_BYTES (default 1 MiB) bounds the ping-pong sizes and the
 * collectives' vectors (a slow emulated machine, tests/vm/vm_clients.sh).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_rank, g_size;
static size_t g_max_bytes = 1 << 20;

static uint8_t pattern(size_t i, int size_idx, int iter, int from) {
  return (uint8_t)(i * 131u + (unsigned)size_idx * 17u + (unsigned)iter * 7u + (unsigned)from * 101u);
}

static void fill(uint8_t* b, size_t n, int size_idx, int iter, int from) {
  for (size_t i = 0; i < n; ++i) b[i] = pattern(i, size_idx, iter, from);
}

/* Returns the number of wrong bytes (and prints the first). */
static size_t check(const uint8_t* b, size_t n, int size_idx, int iter, int from, const char* what) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint8_t want = pattern(i, size_idx, iter, from);
    if (b[i] != want) {
      if (bad == 0)
        fprintf(stderr, "rank %d: %s size %zu iter %d: byte %zu is 0x%02x, want 0x%02x\n", g_rank,
                what, n, iter, i, b[i], want);
      ++bad;
    }
  }
  return bad;
}

static size_t pingpong(int iters) {
  static const size_t kSizes[] = {1, 64, 4096, 65536, 1 << 20};
  const int nsizes = (int)(sizeof kSizes / sizeof kSizes[0]);
  const int peer = 1 - g_rank;
  size_t bad = 0;
  uint8_t* sbuf = malloc(kSizes[nsizes - 1]);
  uint8_t* rbuf = malloc(kSizes[nsizes - 1]);
  if (!sbuf || !rbuf) MPI_Abort(MPI_COMM_WORLD, 3);
  for (int s = 0; s < nsizes; ++s) {
    const size_t n = kSizes[s];
    if (n > g_max_bytes) break;
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; ++it) {
      memset(rbuf, 0, n);
      if (g_rank == 0) {
        fill(sbuf, n, s, it, 0);
        MPI_Send(sbuf, (int)n, MPI_BYTE, peer, s, MPI_COMM_WORLD);
        MPI_Recv(rbuf, (int)n, MPI_BYTE, peer, s, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad += check(rbuf, n, s, it, 1, "pong");
      } else {
        MPI_Status st;
        int count = 0;
        MPI_Recv(rbuf, (int)n, MPI_BYTE, peer, s, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        if ((size_t)count != n) {
          fprintf(stderr, "rank 1: ping size %zu: received %d bytes\n", n, count);
          ++bad;
        }
        bad += check(rbuf, n, s, it, 0, "ping");
        fill(sbuf, n, s, it, 1);
        MPI_Send(sbuf, (int)n, MPI_BYTE, peer, s, MPI_COMM_WORLD);
      }
    }
    double us = (MPI_Wtime() - t0) * 1e6 / iters / 2;
    if (g_rank == 0) printf("pingpong size %zu: %d round trips, %.1f us one way\n", n, iters, us);
  }
  free(sbuf);
  free(rbuf);
  return bad;
}

static size_t collectives(int iters) {
  /* 64 Ki int64 (512 KiB), or MAX_BYTES of them */
  const int kN = (int)(g_max_bytes / 8 < (1 << 16) ? (g_max_bytes / 8 > 128 ? g_max_bytes / 8 : 128)
                                                   : (1 << 16));
  int64_t* in = malloc(kN * sizeof *in);
  int64_t* out = malloc(kN * sizeof *out);
  int32_t* a2a_in = malloc((size_t)g_size * 1024 * sizeof *a2a_in);
  int32_t* a2a_out = malloc((size_t)g_size * 1024 * sizeof *a2a_out);
  if (!in || !out || !a2a_in || !a2a_out) MPI_Abort(MPI_COMM_WORLD, 3);
  size_t bad = 0;
  for (int it = 0; it < iters; ++it) {
    for (int i = 0; i < kN; ++i) in[i] = (int64_t)(g_rank + 1) * (i + 1) + it;
    MPI_Allreduce(in, out, kN, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    /* sum over r of (r+1)(i+1) + it = (i+1) * size(size+1)/2 + size*it */
    for (int i = 0; i < kN; ++i) {
      int64_t want = (int64_t)(i + 1) * g_size * (g_size + 1) / 2 + (int64_t)g_size * it;
      if (out[i] != want) {
        if (!bad) fprintf(stderr, "rank %d: allreduce sum [%d] = %lld, want %lld\n", g_rank, i,
                          (long long)out[i], (long long)want);
        ++bad;
      }
    }
    MPI_Allreduce(in, out, kN, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    for (int i = 0; i < kN; ++i) {
      int64_t want = (int64_t)g_size * (i + 1) + it;
      if (out[i] != want) {
        if (!bad) fprintf(stderr, "rank %d: allreduce max [%d] = %lld, want %lld\n", g_rank, i,
                          (long long)out[i], (long long)want);
        ++bad;
      }
    }
    /* bcast from the last rank */
    for (int i = 0; i < kN; ++i) out[i] = g_rank == g_size - 1 ? (int64_t)i * 3 - it : -1;
    MPI_Bcast(out, kN, MPI_INT64_T, g_size - 1, MPI_COMM_WORLD);
    for (int i = 0; i < kN; ++i)
      if (out[i] != (int64_t)i * 3 - it) {
        if (!bad) fprintf(stderr, "rank %d: bcast [%d] = %lld\n", g_rank, i, (long long)out[i]);
        ++bad;
      }
    /* alltoall: block d of rank r holds r*1000000 + d*1000 + j */
    for (int d = 0; d < g_size; ++d)
      for (int j = 0; j < 1024; ++j) a2a_in[d * 1024 + j] = g_rank * 1000000 + d * 1000 + j + it;
    MPI_Alltoall(a2a_in, 1024, MPI_INT32_T, a2a_out, 1024, MPI_INT32_T, MPI_COMM_WORLD);
    for (int s = 0; s < g_size; ++s)
      for (int j = 0; j < 1024; ++j) {
        int32_t want = s * 1000000 + g_rank * 1000 + j + it;
        if (a2a_out[s * 1024 + j] != want) {
          if (!bad) fprintf(stderr, "rank %d: alltoall from %d [%d] = %d, want %d\n", g_rank, s,
                            j, a2a_out[s * 1024 + j], want);
          ++bad;
        }
      }
  }
  if (g_rank == 0)
    printf("collectives: %d rounds of allreduce sum+max (%d x int64), bcast, alltoall\n", iters,
           kN);
  free(in);
  free(out);
  free(a2a_in);
  free(a2a_out);
  return bad;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const int iters = argc > 1 ? atoi(argv[1]) : 50;
  const long max_bytes = argc > 2 ? atol(argv[2]) : 1 << 20;
  if (g_size != 2 || iters <= 0 || max_bytes < 1) {
    if (g_rank == 0)
      fprintf(stderr, "mpi_check: needs exactly 2 ranks, ITERS > 0 and MAX_BYTES >= 1\n");
    MPI_Finalize();
    return 2;
  }
  g_max_bytes = (size_t)max_bytes;
  char host[MPI_MAX_PROCESSOR_NAME];
  int hlen = 0;
  MPI_Get_processor_name(host, &hlen);
  printf("rank %d of %d on %s\n", g_rank, g_size, host);
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);

  unsigned long long bad = pingpong(iters);
  bad += collectives(iters < 10 ? iters : 10);

  unsigned long long total = 0;
  MPI_Reduce(&bad, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) {
    if (total) printf("mpi_check: FAILED: %llu wrong values\n", total);
    else printf("mpi_check: ok\n");
  }
  /* every rank exits non-zero when it saw a wrong byte */
  MPI_Bcast(&total, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return total ? 1 : 0;
}
