/* Peer benchmark: OpenBLAS sgemm (Debian libopenblas-dev) at rectangular shapes, row-major
 * C (m x n) = A (m x k) * B (k x n), timed like ../shared/peers/openblas_sgemm.c (1 s after one
 * warm-up call). Prints: openblas sgemm m=M n=N k=K gflops=X
 * Usage: openblas_sgemm_shapes MxNxK ...   (OPENBLAS_CORETYPE / OPENBLAS_NUM_THREADS as there) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    long m, n, k;
    if (sscanf(argv[i], "%ldx%ldx%ld", &m, &n, &k) != 3 || m <= 0 || n <= 0 || k <= 0) {
      fprintf(stderr, "openblas_sgemm_shapes: expected MxNxK, got '%s'\n", argv[i]);
      return 2;
    }
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n),
          *c = malloc(sizeof(float) * m * n);
    for (long j = 0; j < m * k; ++j) a[j] = (float)rand() / RAND_MAX;
    for (long j = 0; j < k * n; ++j) b[j] = (float)rand() / RAND_MAX;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.f, a, k, b, n, 0.f, c, n);
    int reps = 0;
    double t0 = now();
    do {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.f, a, k, b, n, 0.f, c, n);
      ++reps;
    } while (now() - t0 < 1.0);
    printf("openblas sgemm m=%ld n=%ld k=%ld gflops=%.1f\n", m, n, k,
           2.0 * m * n * k * reps / (now() - t0) / 1e9);
    free(a);
    free(b);
    free(c);
  }
  return 0;
}
