/* Peer benchmark: OpenBLAS sgemm (Debian libopenblas-dev) at rectangular shapes, row-major
 * C (m x n) = op(A) (m x k) * op(B) (k x n), timed like ../shared/peers/openblas_sgemm.c (1 s after
 * one warm-up call). A shape is [B*]MxNxK[:ab] as bench_sgemm takes it: a, b each n (as stored)
 * or t (transposed); B independent products, one cblas_sgemm call after another (OpenBLAS 0.3.21
 * has no batched call; PyTorch's CPU bmm over BLAS loops the same way).
 * Prints: openblas sgemm m=M n=N k=K [op=ab] [batch=B] gflops=X
 * Usage: openblas_sgemm_shapes SHAPE ...   (OPENBLAS_CORETYPE / OPENBLAS_NUM_THREADS as there) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    long batch = 1, m = 0, n = 0, k = 0;
    char ta = 'n', tb = 'n';
    int used = 0;
    const char* spec = argv[i];
    const char* star = strchr(spec, '*');
    if (star) {
      batch = atol(spec);
      spec = star + 1;
    }
    const int got = sscanf(spec, "%ldx%ldx%ld%n:%c%c%n", &m, &n, &k, &used, &ta, &tb, &used);
    if ((got != 3 && got != 5) || spec[used] != '\0' || batch <= 0 || m <= 0 || n <= 0 ||
        k <= 0 || (ta != 'n' && ta != 't') || (tb != 'n' && tb != 't')) {
      fprintf(stderr, "openblas_sgemm_shapes: expected [B*]MxNxK[:ab] (a, b: n or t), got '%s'\n",
              argv[i]);
      return 2;
    }
    const enum CBLAS_TRANSPOSE opa = ta == 't' ? CblasTrans : CblasNoTrans;
    const enum CBLAS_TRANSPOSE opb = tb == 't' ? CblasTrans : CblasNoTrans;
    const long lda = ta == 't' ? m : k, ldb = tb == 't' ? k : n;
    float *a = malloc(sizeof(float) * batch * m * k), *b = malloc(sizeof(float) * batch * k * n),
          *c = malloc(sizeof(float) * batch * m * n);
    for (long j = 0; j < batch * m * k; ++j) a[j] = (float)rand() / RAND_MAX;
    for (long j = 0; j < batch * k * n; ++j) b[j] = (float)rand() / RAND_MAX;
    int reps = -1; /* the first pass is the warm-up */
    double t0 = 0;
    do {
      for (long p = 0; p < batch; ++p)
        cblas_sgemm(CblasRowMajor, opa, opb, m, n, k, 1.f, a + p * m * k, lda, b + p * k * n, ldb,
                    0.f, c + p * m * n, n);
      if (++reps == 0) t0 = now();
    } while (reps == 0 || now() - t0 < 1.0);
    char extra[48] = "";
    if (ta == 't' || tb == 't') snprintf(extra, sizeof extra, " op=%c%c", ta, tb);
    if (batch > 1)
      snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " batch=%ld", batch);
    printf("openblas sgemm m=%ld n=%ld k=%ld%s gflops=%.1f\n", m, n, k, extra,
           2.0 * batch * m * n * k * reps / (now() - t0) / 1e9);
    free(a);
    free(b);
    free(c);
  }
  return 0;
}
