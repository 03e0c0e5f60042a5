"""Which functions and derivatives take complex tensors: none may give a silently wrong result.

Forward: NumPy computes many functions on complex numbers that torch refuses (it orders complex
numbers lexicographically, rounds each part, ...). ``REFUSED`` names the public functions that
refuse a complex tensor operand, with torch's error; ``optable`` wraps each as it is bound (the
elementwise fronts test it themselves, where they already look at the dtype), so functions that
take complex tensors pay nothing.

Backward: a derivative rule written for real inputs gives a wrong gradient for complex ones
(torch's convention is the conjugate Wirtinger one). ``guard_rule`` keeps the rules known to be
right (``COMPLEX_RULES``: linear maps with real coefficients and the rules written with the
conjugate), turns those of holomorphic functions, which compute ``g * f'(z)``, into the complex
one ``conj(rule(conj(g))) = g * conj(f'(z))`` (``HOLOMORPHIC``), and makes every other rule refuse
a node with a complex input.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["REFUSED", "COMPLEX_RULES", "HOLOMORPHIC", "refused_error", "refuses_complex", "guard_rule"]

_NOT_FOR = '"{kernel}" not implemented for \'{T}\''
_ORDER = "complex numbers have no order: apply it to z.real, z.imag or z.abs()"
_PARTS = "apply it to z.real and z.imag (or plugtorch.view_as_real(z))"

# public name -> (torch's exception, torch's message ({T}: ComplexFloat/ComplexDouble), what to do)
REFUSED: dict[str, tuple[type[Exception], str, str]] = {}


def _refuse(names: str, exc: type[Exception], message: str, hint: str) -> None:
    for name in names.split():
        REFUSED[name] = (exc, message, hint)


def _kernels(pairs: str, hint: str) -> None:
    """name=kernel pairs with torch's '"kernel" not implemented' message."""
    for pair in pairs.split():
        name, _, kernel = pair.partition("=")
        REFUSED[name] = (NotImplementedError, _NOT_FOR.replace("{kernel}", kernel or name), hint)


_kernels("amax=max_values_cpu amin=min_values_cpu max=max_all min=min_all median=median_cpu "
         "nanmedian=median_cpu unique=unique kthvalue=kthvalue_cpu aminmax=aminmax_cpu cummax=cummax_cpu "
         "cummin=cummin_cpu lt=lt_cpu less=lt_cpu le=le_cpu less_equal=le_cpu gt=gt_cpu greater=gt_cpu "
         "ge=ge_cpu greater_equal=ge_cpu remainder=remainder_cpu fmod=fmod_cpu floor_divide=div_floor_cpu "
         "searchsorted=searchsorted_out_cpu bucketize=searchsorted_out_cpu histc=aminmax_cpu "
         "clamp_min=clamp_cpu clamp_max=clamp_cpu", _ORDER)
_kernels("mode=mode_cpu", _ORDER)
_kernels("unique_consecutive=unique", _PARTS)
_kernels("round=round_vml_cpu frac=frac_cpu erf=erf_vml_cpu erfc=erfc_vml_cpu erfinv=erfinv_vml_cpu "
         "lgamma=lgamma_vml_cpu digamma=digamma polygamma=polygamma logit=logit_cpu xlogy=xlogy_cpu "
         "copysign=copysign_cpu atan2=atan2_cpu arctan2=atan2_cpu hypot=hypot_cpu i0=i0_cpu "
         "softmax=softmax_lastdim_kernel_impl log_softmax=log_softmax_lastdim_kernel_impl "
         "softmin=softmax_lastdim_kernel_impl leaky_relu=leaky_relu_cpu gelu=GeluKernelImpl elu=elu_cpu "
         "selu=elu_cpu celu=elu_cpu softplus=softplus_cpu mse_loss=mse_cpu l1_loss=abs_cpu "
         "dropout=bernoulli_scalar_cpu_", _PARTS)
_refuse("argmax", RuntimeError, "argmax(): does not support complex input", _ORDER)
_refuse("argmin", RuntimeError, "argmin(): does not support complex input", _ORDER)
_refuse("sort argsort msort", RuntimeError, "Sort does not support complex dtypes on CPU", _ORDER)
_refuse("topk", RuntimeError, "topk does not support complex dtypes on CPU", _ORDER)
_refuse("clamp clip relu relu6 hardtanh", NotImplementedError, "clamp is not supported for complex types", _ORDER)
_refuse("sign", NotImplementedError, "Unlike NumPy, torch.sign is not intended to support complex numbers. "
        "Please use torch.sgn instead.", "plugtorch.sgn(z) is z / |z|")
_refuse("trunc fix", NotImplementedError, "trunc is not supported for complex inputs", _PARTS)
_refuse("floor", NotImplementedError, "floor is not supported for complex inputs", _PARTS)
_refuse("ceil", NotImplementedError, "ceil is not supported for complex inputs", _PARTS)
_refuse("isneginf", RuntimeError, "isneginf does not support complex inputs.", _PARTS)
_refuse("isposinf", RuntimeError, "isposinf does not support complex inputs.", _PARTS)
_refuse("signbit", NotImplementedError, "signbit is not implemented for complex tensors.", _PARTS)
_refuse("maximum", RuntimeError, "maximum not implemented for complex tensors.", _ORDER)
_refuse("minimum", RuntimeError, "minimum not implemented for complex tensors.", _ORDER)
_refuse("fmax", RuntimeError, "fmax not implemented for complex tensors.", _ORDER)
_refuse("fmin", RuntimeError, "fmin not implemented for complex tensors.", _ORDER)
_refuse("deg2rad", RuntimeError, "deg2rad is not supported for complex tensors.", _PARTS)
_refuse("rad2deg", RuntimeError, "rad2deg is not supported for complex tensors.", _PARTS)
_kernels("avg_pool1d=avg_pool2d avg_pool2d=avg_pool2d avg_pool3d=avg_pool3d_out_frame", _PARTS)
_refuse("nansum nanmean", RuntimeError, "nansum on CPU does not support complex inputs", _PARTS)
# torch computes these on complex tensors; plugtorch's are real-only, so it refuses instead
_refuse("float_power ldexp cov corrcoef logsumexp std var norm std_mean var_mean trapezoid trapz "
        "cumulative_trapezoid", NotImplementedError,
        "{name} is not implemented for complex tensors in plugtorch", _PARTS)
_refuse("heaviside", RuntimeError, "heaviside is not yet implemented for complex tensors.", _PARTS)


def _type_name(dtype: Any) -> str:
    return "ComplexDouble" if dtype.name == "complex128" else "ComplexFloat"


def refused_error(name: str, t: Any) -> Exception:
    """torch's error for function ``name`` given the complex tensor ``t``, naming both and what to do."""
    exc, message, hint = REFUSED[name]
    message = message.replace("{T}", _type_name(t.dtype)).replace("{name}", name)
    return exc(f"{message} ({name}() got a {t.dtype.name} tensor "
               f"of shape {list(t.shape)}; {hint})")


def _complex_operand(args: tuple, kwargs: dict) -> Any:
    for a in (*args, *kwargs.values()):
        if getattr(getattr(a, "dtype", None), "is_complex", False) is True:
            return a
    return None


def refuses_complex(name: str, fn: Callable) -> Callable:
    """``fn``, bound as ``name``, refusing a complex tensor operand as torch does (``fn`` itself
    when it is not in ``REFUSED`` or tests the dtype on its own: ``fn.checks_complex``)."""
    if name not in REFUSED or getattr(fn, "checks_complex", False):
        return fn
    from .optable import INTERCEPT
    from .tensor import Tensor  # (bound as ops are declared, after the tensor module)

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        if len(args) == 1 and not kwargs:  # the commonest call, f(x)
            x = args[0]
            if isinstance(x, Tensor) and not x.dtype.is_complex:
                return fn(x)
        if INTERCEPT.on and (out := INTERCEPT.call(checked, args, kwargs)) is not NotImplemented:
            return out  # an fx.Proxy: the public function (this one) is what the graph calls
        z = _complex_operand(args, kwargs)
        if z is not None:
            raise refused_error(name, z)
        return fn(*args, **kwargs)
    checked.checks_complex = True  # type: ignore[attr-defined]
    return checked


# Rules right for complex inputs as written: linear maps with real coefficients (their adjoint
# is their transpose), and rules that carry the conjugate (mul, div, exp, log, abs).
COMPLEX_RULES = frozenset("""
    add sub neg mul div exp log abs where sum mean cumsum cast move view_as_real view_as_complex
    fft_c2c fft_r2c fft_c2r gather getitem index_put index_put_zeros index_select masked_fill
    scatter_add scatter index_fill flip pad unfold cat clone contiguous expand permute reshape
    squeeze stack t transpose unsqueeze view col2im fold im2col windows
    linalg_solve_triangular linalg_solve linalg_inv linalg_det linalg_logabsdet cholesky_factor qr_factors
    svd_factors svd_values eigh_factors eigh_values eig_factors lu_factors
""".split())

# Holomorphic functions whose rule computes g * f'(z) (for a product, the other factor):
# conj(rule(conj(g))) is torch's complex gradient.
HOLOMORPHIC = frozenset("""
    sin cos tan tanh tanh_backward asin acos atan asinh acosh atanh sqrt rsqrt reciprocal square
    expm1 log1p pow sigmoid
    sigmoid_backward matmul linear prod
""".split())


def _has_complex(meta: tuple) -> bool:
    for m in meta:
        if m is not None and m[1].is_complex:
            return True
    return False


def guard_rule(name: str, rule: Callable | None) -> Callable | None:
    """The rule a node of op ``name`` runs: ``rule`` where it is right for complex inputs, else a
    rule that conjugates (holomorphic ops) or refuses when an input of the node is complex."""
    if rule is None or name in COMPLEX_RULES:
        return rule
    if name in HOLOMORPHIC:
        def holomorphic(ctx, g):
            if not _has_complex(ctx.meta):
                return rule(ctx, g)
            from .ops.complex import conj
            grads = rule(ctx, conj(g))
            if type(grads) is tuple:
                return tuple(None if v is None else conj(v) for v in grads)
            return conj(grads)
        holomorphic.__wrapped__ = rule  # type: ignore[attr-defined]
        return holomorphic

    def real_only(ctx, g):
        if _has_complex(ctx.meta):
            dtypes = ", ".join(m[1].name for m in ctx.meta if m is not None)
            raise NotImplementedError(
                f"the derivative of '{name}' is not implemented for complex inputs in plugtorch "
                f"(inputs of dtype {dtypes}); differentiate through real tensors (z.real, z.imag, "
                "plugtorch.view_as_real(z)) or ops whose complex gradients are supported "
                "(docs/fft_special.md)")
        return rule(ctx, g)
    real_only.__wrapped__ = rule  # type: ignore[attr-defined]
    return real_only
