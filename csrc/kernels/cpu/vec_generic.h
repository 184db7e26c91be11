// Vec: W float lanes held in a plain array. Loops over fixed-size arrays auto-vectorize at -O3 with
// whatever the baseline target offers (SSE2 on x86-64, NEON on aarch64), so this is the portable
// variant, not a scalar one. Included by kernel files inside their `generic` namespace.
struct Vec {
  using acc_t = float;
  static constexpr int W = 8;
  float v[W];

  static Vec zero() { Vec r; for (int i = 0; i < W; ++i) r.v[i] = 0.f; return r; }
  static Vec set1(float s) { Vec r; for (int i = 0; i < W; ++i) r.v[i] = s; return r; }
  template <typename T> static Vec load(const T* p) {
    Vec r; for (int i = 0; i < W; ++i) r.v[i] = to_float(p[i]); return r;
  }
  template <typename T> void store(T* p) const {
    for (int i = 0; i < W; ++i) p[i] = from_float<T>(v[i]);
  }
  // a * b + c
  static Vec fma(Vec a, Vec b, Vec c) { for (int i = 0; i < W; ++i) c.v[i] += a.v[i] * b.v[i]; return c; }
  float sum() const { float s = 0.f; for (int i = 0; i < W; ++i) s += v[i]; return s; }
};
inline Vec operator+(Vec a, Vec b) { for (int i = 0; i < Vec::W; ++i) a.v[i] += b.v[i]; return a; }
inline Vec operator-(Vec a, Vec b) { for (int i = 0; i < Vec::W; ++i) a.v[i] -= b.v[i]; return a; }
inline Vec operator*(Vec a, Vec b) { for (int i = 0; i < Vec::W; ++i) a.v[i] *= b.v[i]; return a; }

// VecD: the fp64 variant (gradcheck and reference-grade CPU work), 4 double lanes in an array.
struct VecD {
  using acc_t = double;
  static constexpr int W = 4;
  double v[W];

  static VecD zero() { VecD r; for (int i = 0; i < W; ++i) r.v[i] = 0.0; return r; }
  static VecD set1(double s) { VecD r; for (int i = 0; i < W; ++i) r.v[i] = s; return r; }
  static VecD load(const double* p) { VecD r; for (int i = 0; i < W; ++i) r.v[i] = p[i]; return r; }
  void store(double* p) const { for (int i = 0; i < W; ++i) p[i] = v[i]; }
  static VecD fma(VecD a, VecD b, VecD c) { for (int i = 0; i < W; ++i) c.v[i] += a.v[i] * b.v[i]; return c; }
  double sum() const { double s = 0.0; for (int i = 0; i < W; ++i) s += v[i]; return s; }
};
inline VecD operator+(VecD a, VecD b) { for (int i = 0; i < VecD::W; ++i) a.v[i] += b.v[i]; return a; }
inline VecD operator-(VecD a, VecD b) { for (int i = 0; i < VecD::W; ++i) a.v[i] -= b.v[i]; return a; }
inline VecD operator*(VecD a, VecD b) { for (int i = 0; i < VecD::W; ++i) a.v[i] *= b.v[i]; return a; }

