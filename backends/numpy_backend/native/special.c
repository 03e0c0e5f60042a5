/* The special functions NumPy has no ufunc for (torch.special's), one C loop each: the NumPy
 * backend's `special` primitive (../special_functions.py) for float32 and float64 arrays, computed
 * in double and rounded by the caller. Methods, written here from their published formulas:
 *
 *   lgamma, erfc, j0, j1   C's libm.
 *   digamma                 recurrence up to x >= 10, then the asymptotic series
 *                           psi(x) = log x - 1/(2x) - sum B_2k / (2k x^2k); reflection for x < 0.
 *   zeta (Hurwitz)          Euler-Maclaurin summation: a direct sum, the integral and the
 *                           Bernoulli-number corrections (Abramowitz & Stegun 23.2.3); torch's
 *                           domain rules; a negative q through the sum of its first terms in closed
 *                           form. polygamma(n >= 1, x) = (-1)^(n+1) n! zeta(n+1, x).
 *   erfinv, erfcinv, ndtri  M. Giles' single-precision approximation ("Approximating the erfinv
 *                           function", GPU Computing Gems, 2010) as the start, then Newton steps
 *                           on erf (|y| <= 1/2) or on log erfc (the tails), which reach double
 *                           precision; ndtri(p) = -sqrt(2) erfcinv(2p).
 *   erfcx                   exp(x^2) erfc(x) with x^2 split exactly (fma); for x >= 25 the
 *                           asymptotic series 1/(x sqrt(pi)) sum (-1)^k (2k-1)!! / (2x^2)^k.
 *   ndtr, log_ndtr          from erfc and erfcx (log_ndtr(x < 0) = log(erfcx(t) / 2) - t^2,
 *                           t = -x / sqrt(2), which never underflows).
 *   i0, i1 (and e-scaled)   the power series sum (x^2/4)^k / (k! (k + nu)!) for |x| <= 30, the
 *                           Hankel asymptotic expansion e^x / sqrt(2 pi x) sum (-1)^k a_k(nu) / x^k
 *                           beyond (A&S 9.7.1).
 *   gammainc, gammaincc     the series of P(a, x) for x < a + 1, else the continued fraction of
 *                           Q(a, x) by Lentz's method (Numerical Recipes, 3rd ed., 6.2); torch's
 *                           rules at 0, inf and nan.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <string.h>

#define PI 3.14159265358979323846
#define SQRT_PI 1.77245385090551602730
#define SQRT2 1.41421356237309504880
#define EPS DBL_EPSILON

static double digamma(double x)
{
    if (isnan(x))
        return x;
    if (x == 0)
        return copysign(INFINITY, -x); /* torch: -inf at +0 */
    if (x < 0) {
        if (x == floor(x))
            return NAN;
        double whole, frac = modf(x, &whole);
        return digamma(1 - x) - PI / tan(PI * frac);
    }
    if (isinf(x))
        return x;
    double shift = 0;
    while (x < 10) {
        shift -= 1 / x;
        x += 1;
    }
    double z = 1 / (x * x);
    double series = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132
                    - z * (691.0 / 32760 - z / 12))))));
    return shift + log(x) - 0.5 / x - series;
}

/* (2k)! / B_2k, k = 1..12: the Euler-Maclaurin corrections' denominators */
static const double EM[12] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1892437580.3183792,
                              74724249600.0, -2950130727918.164, 116467828143500.67, -4597978722407473.0,
                              1.8152105401943546e+17, -7.166165256175667e+18};

static double zeta(double s, double q)
{
    if (isnan(s) || isnan(q))
        return NAN;
    if (s == 1)
        return INFINITY;
    if (s < 1)
        return NAN;
    if (q == INFINITY)
        return 0;
    if (q <= 0) {
        if (q == floor(q))
            return INFINITY;
        if (s != floor(s))
            return NAN; /* a negative q to a non-integer power */
        /* q = f - m: the m terms at q..q+m-1 are (-1)^s (j - f)^-s, j = 1..m, a difference of two
         * zetas at positive arguments (so no loop over |q| terms) */
        double m = -floor(q);
        if (m <= 64) { /* few: summed directly */
            double head = 0;
            for (; q < 0; q += 1)
                head += pow(q, -s);
            return head + zeta(s, q);
        }
        double f = q + m, sign = fmod(s, 2) ? -1 : 1;
        return zeta(s, f) + sign * (zeta(s, 1 - f) - zeta(s, m + 1 - f));
    }
    double sum = pow(q, -s), a = q, term = 0;
    int i = 0;
    while (i < 9 || a <= 9) { /* the direct sum, until the tail formula is accurate */
        i++;
        a += 1;
        term = pow(a, -s);
        sum += term;
        if (fabs(term / sum) < EPS)
            return sum;
    }
    double w = a, rising = 1, k = 0;
    sum += term * w / (s - 1) - 0.5 * term;
    for (int j = 0; j < 12; j++) {
        rising *= s + k;
        term /= w;
        double t = rising * term / EM[j];
        sum += t;
        if (fabs(t / sum) < EPS)
            break;
        k += 1;
        rising *= s + k;
        term /= w;
        k += 1;
    }
    return sum;
}

static double polygamma(long n, double x)
{
    if (n == 0)
        return digamma(x);
    return ((n % 2) ? 1.0 : -1.0) * exp(lgamma((double)n + 1)) * zeta((double)n + 1, x);
}

static double erfcx(double x)
{
    if (isnan(x))
        return x;
    if (x < -27)
        return INFINITY; /* 2 exp(x^2) overflows */
    if (x < 25) {
        double hi = x * x, lo = fma(x, x, -hi); /* x^2 = hi + lo exactly */
        return exp(hi) * exp(lo) * erfc(x);
    }
    if (isinf(x))
        return 0;
    double z = 1 / (2 * x * x), term = 1, sum = 1;
    for (int k = 1; k < 12; k++) {
        term *= -(2 * k - 1) * z;
        sum += term;
    }
    return sum / (x * SQRT_PI);
}

/* Giles' approximation of erfinv(1 - z), from z itself (so the tails keep their precision) */
static double giles(double y, double z)
{
    double w = -log(z * (2 - z)), p;
    if (w < 5) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
    }
    return p * y;
}

/* erfcinv(z) for 0 < z <= 1/2: Newton on log erfc(x) = log z, through erfcx (no underflow) */
static double erfcinv_tail(double z)
{
    double target = log(z), x;
    if (z < 1e-10) { /* beyond Giles' range: erfc(x) ~ exp(-x^2) / (x sqrt(pi)), solved by one iteration */
        x = sqrt(-target);
        x = sqrt(-target - log(x * SQRT_PI));
    } else {
        x = giles(1 - z, z);
    }
    for (int i = 0; i < 60; i++) {
        double e = erfcx(x);
        double step = (log(e) - x * x - target) * SQRT_PI * e / 2;
        x += step;
        if (fabs(step) <= 4 * EPS * fabs(x))
            break;
    }
    return x;
}

static double erfinv(double y)
{
    if (isnan(y) || y < -1 || y > 1)
        return NAN;
    if (y == 1 || y == -1)
        return copysign(INFINITY, y);
    double a = fabs(y);
    if (a > 0.5)
        return copysign(erfcinv_tail(1 - a), y); /* 1 - a is exact here */
    double x = giles(y, 1 - a);
    for (int i = 0; i < 3; i++) /* Newton on erf: two steps reach double precision, a third is spare */
        x -= (erf(x) - y) * SQRT_PI / 2 * exp(x * x);
    return x;
}

static double erfcinv(double z)
{
    if (isnan(z) || z < 0 || z > 2)
        return NAN;
    if (z == 0)
        return INFINITY;
    if (z == 2)
        return -INFINITY;
    if (z <= 0.5)
        return erfcinv_tail(z);
    if (z >= 1.5)
        return -erfcinv_tail(2 - z);
    return erfinv(1 - z);
}

static double ndtri(double p)
{
    if (isnan(p) || p < 0 || p > 1)
        return NAN;
    return 0.0 - SQRT2 * erfcinv(2 * p); /* 0 - 0: +0 at p = 1/2, as torch */
}

static double ndtr(double x)
{
    return 0.5 * erfc(-x / SQRT2);
}

static double log_ndtr(double x)
{
    if (x > 0)
        return log1p(-0.5 * erfc(x / SQRT2));
    double t = -x / SQRT2;
    return log(0.5 * erfcx(t)) - t * t;
}

/* I_nu(|x|) e^-|x| for nu = 0 or 1 */
static double bessel_i_scaled(int nu, double x)
{
    double a = fabs(x);
    if (isinf(a))
        return 0;
    if (a <= 30) {
        double q = a * a / 4, term = nu ? a / 2 : 1, sum = term;
        for (int k = 1; k < 500; k++) {
            term *= q / ((double)k * (k + nu));
            sum += term;
            if (term < EPS * sum)
                break;
        }
        return sum * exp(-a);
    }
    double mu = 4.0 * nu * nu, term = 1, sum = 1;
    for (int k = 1; k < 30; k++) {
        term *= -(mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8 * a);
        sum += term;
    }
    return sum / sqrt(2 * PI * a);
}

static double i0e(double x) { return isnan(x) ? x : bessel_i_scaled(0, x); }
static double i1e(double x) { return isnan(x) || x == 0 ? x + 0.0 : copysign(bessel_i_scaled(1, x), x); }
/* past |x| = 709, e^|x| overflows before the small scaled value can scale it: two halves instead */
static double i0(double x)
{
    double half = exp(fabs(x) / 2);
    return isinf(x) ? NAN : i0e(x) * half * half; /* nan at +-inf, torch's answer */
}

static double i1(double x)
{
    double half = exp(fabs(x) / 2);
    return isinf(x) ? NAN : i1e(x) * half * half; /* i1e(-0) is +0 and i1(+-inf) nan, as torch's */
}

static double gamma_prefactor(double a, double x) { return exp(a * log(x) - x - lgamma(a)); }

/* P(a, x) by its series (x < a + 1) */
static double gamma_series(double a, double x)
{
    double ap = a, term = 1 / a, sum = term;
    for (int n = 0; n < 100000; n++) {
        ap += 1;
        term *= x / ap;
        sum += term;
        if (fabs(term) < fabs(sum) * EPS)
            break;
    }
    return sum * gamma_prefactor(a, x);
}

/* Q(a, x) by its continued fraction (x >= a + 1), Lentz's method */
static double gamma_fraction(double a, double x)
{
    const double tiny = DBL_MIN / EPS;
    double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
    for (int i = 1; i < 100000; i++) {
        double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < tiny)
            d = tiny;
        c = b + an / c;
        if (fabs(c) < tiny)
            c = tiny;
        d = 1 / d;
        double delta = d * c;
        h *= delta;
        if (fabs(delta - 1) < EPS)
            break;
    }
    return h * gamma_prefactor(a, x);
}

/* the regularised incomplete gamma functions: upper = 0 gives P(a, x), 1 gives Q(a, x) */
static double gammainc(double a, double x, int upper)
{
    if (isnan(a) || isnan(x) || x < 0 || a < 0)
        return NAN;
    if (a == 0)
        return x > 0 ? (upper ? 0 : 1) : NAN;
    if (x == 0)
        return upper ? 1 : 0;
    if (isinf(a))
        return isinf(x) ? NAN : (upper ? 1 : 0);
    if (isinf(x))
        return upper ? 0 : 1;
    if (x < a + 1) {
        double p = gamma_series(a, x);
        return upper ? 1 - p : p;
    }
    double q = gamma_fraction(a, x);
    return upper ? q : 1 - q;
}

enum {
    LGAMMA, DIGAMMA, POLYGAMMA, ERFC, ERFCX, ERFINV, NDTRI, NDTR, LOG_NDTR, I0, I0E, I1, I1E, J0, J1,
    ZETA, GAMMAINC, GAMMAINCC, COUNT
};
static const char *const NAMES[COUNT] = {"lgamma", "digamma", "polygamma", "erfc", "erfcx", "erfinv", "ndtri",
                                         "ndtr", "log_ndtr", "i0", "i0e", "i1", "i1e", "j0", "j1", "zeta",
                                         "gammainc", "gammaincc"};

static double unary(int f, double x, long n)
{
    switch (f) {
    case LGAMMA: return lgamma(x);
    case DIGAMMA: return digamma(x);
    case POLYGAMMA: return polygamma(n, x);
    case ERFC: return erfc(x);
    case ERFCX: return erfcx(x);
    case ERFINV: return erfinv(x);
    case NDTRI: return ndtri(x);
    case NDTR: return ndtr(x);
    case LOG_NDTR: return log_ndtr(x);
    case I0: return i0(x);
    case I0E: return i0e(x);
    case I1: return i1(x);
    case I1E: return i1e(x);
    case J0: return isinf(x) ? NAN : j0(x); /* torch's answer at +-inf (libm's is 0) */
    default: return isinf(x) ? NAN : j1(x);
    }
}

/* apply(name, x, y, n, out): out[i] = name(x[i]) (or name(x[i], y[i]), or polygamma(n, x[i])); x, y
 * and out C-contiguous float64 buffers of one length, y None for the one-argument functions */
static PyObject *apply(PyObject *self, PyObject *args)
{
    const char *name;
    PyObject *ox, *oy, *oout;
    long n;
    (void)self;
    if (!PyArg_ParseTuple(args, "sOOlO:apply", &name, &ox, &oy, &n, &oout))
        return NULL;
    int f = 0;
    while (f < COUNT && strcmp(NAMES[f], name))
        f++;
    if (f == COUNT)
        return PyErr_Format(PyExc_ValueError, "special.apply: unknown function '%s'", name);
    int binary = f >= ZETA;
    Py_buffer bx, by, bo;
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;
    if (PyObject_GetBuffer(ox, &bx, flags) < 0)
        return NULL;
    if (binary && PyObject_GetBuffer(oy, &by, flags) < 0) {
        PyBuffer_Release(&bx);
        return NULL;
    }
    if (PyObject_GetBuffer(oout, &bo, flags | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&bx);
        if (binary)
            PyBuffer_Release(&by);
        return NULL;
    }
    Py_ssize_t len = bo.len / (Py_ssize_t)sizeof(double);
    int ok = bx.len == bo.len && (!binary || by.len == bo.len);
    const char *formats[3] = {bx.format, binary ? by.format : "d", bo.format};
    for (int i = 0; i < 3; i++)
        ok &= formats[i] != NULL && strcmp(formats[i], "d") == 0;
    if (ok) {
        const double *x = bx.buf, *y = binary ? by.buf : NULL;
        double *out = bo.buf;
        Py_BEGIN_ALLOW_THREADS
        if (binary)
            for (Py_ssize_t i = 0; i < len; i++)
                out[i] = f == ZETA ? zeta(x[i], y[i]) : gammainc(x[i], y[i], f == GAMMAINCC);
        else
            for (Py_ssize_t i = 0; i < len; i++)
                out[i] = unary(f, x[i], n);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&bx);
    if (binary)
        PyBuffer_Release(&by);
    PyBuffer_Release(&bo);
    if (!ok)
        return PyErr_Format(PyExc_ValueError, "special.apply(%s): x%s and out must be float64 buffers of one "
                            "length", name, binary ? ", y" : "");
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"apply", apply, METH_VARARGS, "apply(name, x, y, n, out): a special function over float64 buffers"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_special", "torch.special's functions in C", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__special(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddStringConstant(m, "FUNCTIONS", "lgamma digamma polygamma erfc erfcx erfinv ndtri ndtr "
                                        "log_ndtr i0 i0e i1 i1e j0 j1 zeta gammainc gammaincc") < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
