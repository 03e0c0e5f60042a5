/* The core's hottest paths in C, each doing what its Python twin does (native.py says which).

   wrap(data, backend, requires_grad=False): dispatch.wrap, a Tensor around a backend array.
   node(cls, op, rule, next, meta, saved, output, attrs): cls(op, ...) as graph.py's Node.__init__
       makes it, cls being Node or a class of a built-in op's nodes (node_names.named_class).
   edge(t): dispatch.edge, the node gradients for a tensor flow into (every recorded operand's).
   drain(ready, pending, deps, retain_graph, create_graph, step): the backward loop.

   drain pops nodes off the walk's ready list and, for a built-in op's node with no pre-hook and
   a gradient, and for a leaf's AccumulateGrad with no pre-hook, does what engine._Walk.step
   does, in the same order: the version check, the rule, the count check, releasing the saved
   values, fitting each gradient to its input (engine._fit_to_input), summing gradients that
   meet (engine._sum), counting down dependencies and pushing nodes that are ready. Every
   other node (a Function's, an OutputNode, one with hooks, one no gradient reached, a released
   one) goes to step itself. The Python helpers it calls are engine.py's (configure_walk).

   Node and Tensor are __slots__ classes: their fields are read and set at the offsets their
   member descriptors give (configure_types), after a type check for Node (itself, or a subclass
   that adds no fields: is_op_node) and an instance check for Tensor (subclasses keep the
   layout); anything else goes through getattr and fails as Python would. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#define ABI 7 /* native.py checks it: a stale build of older sources is not used */

static PyTypeObject *node_type, *acc_type, *tensor_type;
static PyObject *fn_accumulate, *fn_add, *fn_fit, *fn_check_versions, *fn_wrong_count, *fn_post_hooks;
static PyObject *s_shape, *one, *zero; /* interned "shape", and the ints 1 and 0 */

static PyObject *s_dtype_of; /* interned "dtype_of" */
static PyObject *fn_refresh_view, *fn_python_edge; /* dispatch.py's (configure_edge) */

/* slot offsets: Node's, AccumulateGrad's and Tensor's */
static Py_ssize_t n_op, n_rule, n_next, n_meta, n_saved, n_versions, n_output, n_attrs, n_pre_hooks,
    n_released, n_trace;
static Py_ssize_t a_variable, a_pre_hooks, a_post_hooks;
static Py_ssize_t t_data, t_backend, t_dtype, t_requires_grad, t_grad, t_grad_fn, t_vc, t_accum, t_retains_grad,
    t_view;

static int offset_of(PyTypeObject *tp, const char *name, Py_ssize_t *out) {
    PyObject *d = PyDict_GetItemString(tp->tp_dict, name); /* borrowed */
    if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type) ||
        ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "_native.configure_types: %s.%s is not a __slots__ field", tp->tp_name, name);
        return -1;
    }
    *out = ((PyMemberDescrObject *)d)->d_member->offset;
    return 0;
}

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* A slot's value (new reference), or AttributeError as getattr would raise it. */
static PyObject *slot_get(PyObject *obj, Py_ssize_t off, const char *name) {
    PyObject *v = SLOT(obj, off);
    if (v == NULL)
        return PyObject_GetAttrString(obj, name); /* unset: let getattr raise its own error */
    Py_INCREF(v);
    return v;
}

static void slot_set(PyObject *obj, Py_ssize_t off, PyObject *v) {
    PyObject *old = SLOT(obj, off);
    Py_INCREF(v);
    SLOT(obj, off) = v;
    Py_XDECREF(old);
}

/* A tensor's field, by offset when it is a Tensor, else by name (new reference). */
static PyObject *tensor_get(PyObject *t, Py_ssize_t off, const char *name) {
    if (PyObject_TypeCheck(t, tensor_type))
        return slot_get(t, off, name);
    return PyObject_GetAttrString(t, name);
}

/* t._vc[0] (new reference) */
static PyObject *version_of(PyObject *t) {
    PyObject *vc = tensor_get(t, t_vc, "_vc");
    if (vc == NULL)
        return NULL;
    PyObject *v = PySequence_GetItem(vc, 0);
    Py_DECREF(vc);
    return v;
}

/* The fields node() and wrap() set, in the classes' __slots__ order: the module exports them
   (NODE_FIELDS, TENSOR_FIELDS) and native.py checks the classes have these and no others. */
static const char *const node_names[] = {"op", "rule", "next", "meta", "saved", "versions", "_output",
                                         "attrs", "pre_hooks", "released", "trace", NULL};
static const char *const tensor_names[] = {"_data", "_backend", "dtype", "requires_grad", "grad", "grad_fn",
                                           "_vc", "_accum", "_retains_grad", "_view", NULL};

static int offsets_of(PyTypeObject *tp, const char *const *names, Py_ssize_t **out) {
    for (; *names != NULL; names++, out++)
        if (offset_of(tp, *names, *out) < 0)
            return -1;
    return 0;
}

static PyObject *configure_types(PyObject *self, PyObject *args) {
    PyObject *node, *acc, *tensor;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyType_Type, &node, &PyType_Type, &acc, &PyType_Type, &tensor))
        return NULL;
    Py_ssize_t *node_offsets[] = {&n_op, &n_rule, &n_next, &n_meta, &n_saved, &n_versions, &n_output,
                                  &n_attrs, &n_pre_hooks, &n_released, &n_trace};
    static const char *const acc_names[] = {"variable", "pre_hooks", "post_hooks", NULL};
    Py_ssize_t *acc_offsets[] = {&a_variable, &a_pre_hooks, &a_post_hooks};
    Py_ssize_t *tensor_offsets[] = {&t_data, &t_backend, &t_dtype, &t_requires_grad, &t_grad, &t_grad_fn,
                                    &t_vc, &t_accum, &t_retains_grad, &t_view};
    if (offsets_of((PyTypeObject *)node, node_names, node_offsets) ||
        offsets_of((PyTypeObject *)acc, acc_names, acc_offsets) ||
        offsets_of((PyTypeObject *)tensor, tensor_names, tensor_offsets))
        return NULL;
    node_type = (PyTypeObject *)Py_NewRef(node); /* held for the life of the process */
    acc_type = (PyTypeObject *)Py_NewRef(acc);
    tensor_type = (PyTypeObject *)Py_NewRef(tensor);
    Py_RETURN_NONE;
}

static PyObject *configure_walk(PyObject *self, PyObject *args) {
    if (!PyArg_ParseTuple(args, "OOOOOO", &fn_accumulate, &fn_add, &fn_fit, &fn_check_versions, &fn_wrong_count,
                          &fn_post_hooks))
        return NULL;
    PyObject *keep[] = {fn_accumulate, fn_add, fn_fit, fn_check_versions, fn_wrong_count, fn_post_hooks};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        Py_INCREF(keep[i]); /* held for the life of the process, as engine.py's module holds them */
    Py_RETURN_NONE;
}

/* The version check of _Walk.step: engine._check_versions raises if a saved value changed. */
static int check_versions(PyObject *node, PyObject *versions) {
    PyObject *saved = SLOT(node, n_saved);
    PyObject *vs = PySequence_Fast(versions, "versions must be a tuple");
    if (vs == NULL)
        return -1;
    Py_ssize_t nv = PySequence_Fast_GET_SIZE(vs);
    int bad = 0;
    if (saved != NULL && saved != Py_None) {
        PyObject *ss = PySequence_Fast(saved, "saved must be a tuple");
        if (ss == NULL) {
            Py_DECREF(vs);
            return -1;
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(ss) < nv ? PySequence_Fast_GET_SIZE(ss) : nv;
        for (Py_ssize_t i = 0; i < n && !bad; i++) {
            PyObject *v = PySequence_Fast_GET_ITEM(vs, i);
            if (v == Py_None)
                continue;
            PyObject *now = version_of(PySequence_Fast_GET_ITEM(ss, i));
            int ne = now == NULL ? -1 : PyObject_RichCompareBool(now, v, Py_NE);
            Py_XDECREF(now);
            if (ne < 0) {
                Py_DECREF(ss);
                Py_DECREF(vs);
                return -1;
            }
            bad = ne;
        }
        Py_DECREF(ss);
    }
    PyObject *out = SLOT(node, n_output);
    if (!bad && out != NULL && out != Py_None) {
        if (nv == 0) {
            Py_DECREF(vs);
            PyErr_SetString(PyExc_IndexError, "tuple index out of range");
            return -1;
        }
        PyObject *now = version_of(out);
        bad = now == NULL ? -1 : PyObject_RichCompareBool(now, PySequence_Fast_GET_ITEM(vs, nv - 1), Py_NE);
        Py_XDECREF(now);
    }
    Py_DECREF(vs);
    if (bad < 0)
        return -1;
    if (bad) {
        PyObject *r = PyObject_CallOneArg(fn_check_versions, node);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* Hand gradient gi to input i's node: fit it, sum it into what is pending, count down. */
static int pass_on(PyObject *node, Py_ssize_t i, PyObject *child, PyObject *gi, PyObject *meta, PyObject *pending,
                   PyObject *deps, PyObject *ready, PyObject *create_graph) {
    if (gi != Py_None) {
        Py_INCREF(gi);
        PyObject *m = PySequence_GetItem(meta, i);
        if (m == NULL)
            goto fail_gi;
        PyObject *shape = NULL, *dtype = NULL;
        PyObject *mf = PySequence_Fast(m, "cannot unpack non-iterable meta");
        Py_DECREF(m);
        if (mf == NULL)
            goto fail_gi;
        if (PySequence_Fast_GET_SIZE(mf) != 2) {
            PyErr_Format(PyExc_ValueError, "expected 2 values to unpack (got %zd)", PySequence_Fast_GET_SIZE(mf));
            Py_DECREF(mf);
            goto fail_gi;
        }
        shape = PySequence_Fast_GET_ITEM(mf, 0);
        dtype = PySequence_Fast_GET_ITEM(mf, 1);
        PyObject *data = tensor_get(gi, t_data, "_data");
        PyObject *gshape = data == NULL ? NULL : PyObject_GetAttr(data, s_shape);
        Py_XDECREF(data);
        int differ = gshape == NULL ? -1 : PyObject_RichCompareBool(gshape, shape, Py_NE);
        Py_XDECREF(gshape);
        if (differ == 0) {
            PyObject *gd = tensor_get(gi, t_dtype, "dtype");
            differ = gd == NULL ? -1 : gd != dtype;
            Py_XDECREF(gd);
        }
        Py_DECREF(mf);
        if (differ < 0)
            goto fail_gi;
        if (differ) {
            PyObject *idx = PyLong_FromSsize_t(i);
            PyObject *fit = idx == NULL ? NULL : PyObject_CallFunctionObjArgs(fn_fit, node, idx, gi, NULL);
            Py_XDECREF(idx);
            Py_DECREF(gi);
            if (fit == NULL)
                return -1;
            gi = fit;
        }
        PyObject *prev = PyDict_GetItemWithError(pending, child); /* borrowed */
        if (prev == NULL && PyErr_Occurred())
            goto fail_gi;
        if (prev != NULL && prev != Py_None) {
            PyObject *sum = PyObject_CallFunctionObjArgs(fn_add, prev, gi, create_graph, NULL);
            Py_DECREF(gi);
            if (sum == NULL)
                return -1;
            gi = sum;
        }
        int err = PyDict_SetItem(pending, child, gi);
        Py_DECREF(gi);
        if (err)
            return -1;
    }
    PyObject *left = PyDict_GetItemWithError(deps, child); /* borrowed */
    if (left == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, child);
        return -1;
    }
    PyObject *now = PyNumber_Subtract(left, one);
    if (now == NULL)
        return -1;
    int err = PyDict_SetItem(deps, child, now);
    int done = err ? -1 : PyObject_RichCompareBool(now, zero, Py_EQ);
    Py_DECREF(now);
    if (done < 0)
        return -1;
    return done ? PyList_Append(ready, child) : 0;
fail_gi:
    Py_DECREF(gi);
    return -1;
}

/* One built-in op's node, with a gradient, no pre-hooks, not released (_Walk.step's common path). */
static int run_node(PyObject *node, PyObject *g, PyObject *pending, PyObject *deps, PyObject *ready,
                    int retain_graph, PyObject *create_graph) {
    PyObject *versions = SLOT(node, n_versions);
    if (versions != NULL && versions != Py_None && check_versions(node, versions) < 0)
        return -1;
    PyObject *rule = slot_get(node, n_rule, "rule");
    if (rule == NULL)
        return -1;
    PyObject *call_args[2] = {node, g};
    PyObject *grads = PyObject_Vectorcall(rule, call_args, 2, NULL);
    Py_DECREF(rule);
    if (grads == NULL)
        return -1;
    if (!PyTuple_CheckExact(grads)) {
        PyObject *one = PyTuple_Pack(1, grads);
        Py_DECREF(grads);
        if (one == NULL)
            return -1;
        grads = one;
    }
    PyObject *next = slot_get(node, n_next, "next");
    PyObject *nf = next == NULL ? NULL : PySequence_Fast(next, "a node's next must be a tuple");
    Py_XDECREF(next);
    if (nf == NULL) {
        Py_DECREF(grads);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(nf);
    if (PyTuple_GET_SIZE(grads) != n) {
        PyObject *r = PyObject_CallFunctionObjArgs(fn_wrong_count, node, grads, NULL); /* raises */
        Py_XDECREF(r);
        Py_DECREF(grads);
        Py_DECREF(nf);
        return -1;
    }
    /* released only after the rule ran, as in step (the versions were read before) */
    versions = SLOT(node, n_versions);
    if (!retain_graph && versions != NULL && versions != Py_None) {
        slot_set(node, n_saved, Py_None);
        slot_set(node, n_output, Py_None);
        slot_set(node, n_released, Py_True);
    }
    PyObject *meta = slot_get(node, n_meta, "meta");
    int err = meta == NULL ? -1 : 0;
    for (Py_ssize_t i = 0; i < n && !err; i++) {
        PyObject *child = PySequence_Fast_GET_ITEM(nf, i);
        if (child != Py_None)
            err = pass_on(node, i, child, PyTuple_GET_ITEM(grads, i), meta, pending, deps, ready, create_graph);
    }
    Py_XDECREF(meta);
    Py_DECREF(nf);
    Py_DECREF(grads); /* before the next node: pending now holds the gradients alone */
    return err;
}

/* A leaf's AccumulateGrad with no pre-hooks (_Walk.step's path for it, accumulating). */
static int run_leaf(PyObject *node, PyObject *g, PyObject *create_graph) {
    if (g == Py_None)
        return 0;
    PyObject *variable = slot_get(node, a_variable, "variable");
    if (variable == NULL)
        return -1;
    /* the same references to g as step's call: this frame's one, then _accumulate's parameter */
    PyObject *r = PyObject_CallFunctionObjArgs(fn_accumulate, variable, g, create_graph, NULL);
    Py_DECREF(variable);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    PyObject *hooks = SLOT(node, a_post_hooks);
    if (hooks != NULL && hooks != Py_None) {
        r = PyObject_CallOneArg(fn_post_hooks, node);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* Node, or a class of a built-in op's nodes (node_names.named_class): a Node subclass that adds no
   fields and no __dict__, so its slots sit where Node's do. A Function's ctx adds fields: not one. */
static int is_op_node(PyTypeObject *tp) {
    return tp == node_type || (tp->tp_base == node_type && tp->tp_basicsize == node_type->tp_basicsize &&
                               tp->tp_dictoffset == 0);
}

/* drain(ready, pending, deps, retain_graph, create_graph, step): run nodes until none is ready. */
static PyObject *drain(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyList_CheckExact(args[0]) || !PyDict_CheckExact(args[1]) || !PyDict_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "drain(ready: list, pending: dict, deps: dict, retain_graph, "
                                         "create_graph, step)");
        return NULL;
    }
    if (node_type == NULL || fn_accumulate == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_native.drain before configure_types and configure_walk");
        return NULL;
    }
    PyObject *ready = args[0], *pending = args[1], *deps = args[2], *create_graph = args[4], *step = args[5];
    int retain_graph = PyObject_IsTrue(args[3]);
    if (retain_graph < 0)
        return NULL;
    Py_ssize_t size;
    while ((size = PyList_GET_SIZE(ready)) > 0) {
        PyObject *node = PyList_GET_ITEM(ready, size - 1);
        Py_INCREF(node);
        if (PyList_SetSlice(ready, size - 1, size, NULL) < 0) {
            Py_DECREF(node);
            return NULL;
        }
        PyObject *g = PyDict_GetItemWithError(pending, node); /* pending.pop(node, None) */
        if (g != NULL) {
            Py_INCREF(g);
            if (PyDict_DelItem(pending, node) < 0) {
                Py_DECREF(g);
                Py_DECREF(node);
                return NULL;
            }
        } else if (PyErr_Occurred()) {
            Py_DECREF(node);
            return NULL;
        } else {
            g = Py_NewRef(Py_None);
        }
        int err;
        PyTypeObject *tp = Py_TYPE(node);
        if (is_op_node(tp) && g != Py_None && SLOT(node, n_pre_hooks) == Py_None &&
            SLOT(node, n_released) == Py_False) {
            err = run_node(node, g, pending, deps, ready, retain_graph, create_graph);
        } else if (tp == acc_type && SLOT(node, a_pre_hooks) == Py_None) {
            err = run_leaf(node, g, create_graph);
        } else {
            PyObject *call_args[2] = {node, g};
            PyObject *r = PyObject_Vectorcall(step, call_args, 2, NULL);
            err = r == NULL ? -1 : 0;
            Py_XDECREF(r);
        }
        Py_DECREF(g);
        Py_DECREF(node);
        if (err)
            return NULL;
    }
    Py_RETURN_NONE;
}



static PyObject *wrap(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "wrap(data, backend, requires_grad=False)");
        return NULL;
    }
    if (tensor_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_native.wrap before configure_types");
        return NULL;
    }
    PyObject *data = args[0], *backend = args[1];
    PyObject *rg = nargs == 3 ? args[2] : Py_False;
    PyObject *dtype = PyObject_CallMethodOneArg(backend, s_dtype_of, data);
    if (dtype == NULL)
        return NULL;
    PyObject *vc = PyList_New(1);
    if (vc == NULL) {
        Py_DECREF(dtype);
        return NULL;
    }
    PyList_SET_ITEM(vc, 0, Py_NewRef(zero));
    PyObject *t = tensor_type->tp_alloc(tensor_type, 0);
    if (t == NULL) {
        Py_DECREF(dtype);
        Py_DECREF(vc);
        return NULL;
    }
    SLOT(t, t_data) = Py_NewRef(data);
    SLOT(t, t_backend) = Py_NewRef(backend);
    SLOT(t, t_dtype) = dtype;
    SLOT(t, t_requires_grad) = Py_NewRef(rg);
    SLOT(t, t_grad) = Py_NewRef(Py_None);
    SLOT(t, t_grad_fn) = Py_NewRef(Py_None);
    SLOT(t, t_vc) = vc;
    SLOT(t, t_accum) = Py_NewRef(Py_None);
    SLOT(t, t_retains_grad) = Py_NewRef(Py_False);
    SLOT(t, t_view) = Py_NewRef(Py_None);
    return t;
}

static PyObject *configure_edge(PyObject *self, PyObject *args) {
    PyObject *refresh, *python_edge;
    if (!PyArg_ParseTuple(args, "OO", &refresh, &python_edge))
        return NULL;
    Py_XSETREF(fn_refresh_view, Py_NewRef(refresh));
    Py_XSETREF(fn_python_edge, Py_NewRef(python_edge));
    Py_RETURN_NONE;
}

/* edge(t): dispatch.edge's steps in the same order: a view whose generation is behind its memory's
   takes its node again (refresh_view), then t's grad_fn, else for a tensor that requires grad its
   AccumulateGrad (made once), else None. Anything but a Tensor with the usual fields (a list for
   _vc, a 5-tuple for _view) goes to the Python twin, which fails or succeeds as it would. */
static PyObject *edge(PyObject *self, PyObject *t) {
    if (tensor_type == NULL || fn_python_edge == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_native.edge before configure_types and configure_edge");
        return NULL;
    }
    if (!PyObject_TypeCheck(t, tensor_type))
        return PyObject_CallOneArg(fn_python_edge, t);
    PyObject *fn = SLOT(t, t_grad_fn), *view = SLOT(t, t_view), *rg = SLOT(t, t_requires_grad);
    if (fn == NULL || view == NULL || rg == NULL || SLOT(t, t_accum) == NULL)
        return PyObject_CallOneArg(fn_python_edge, t); /* an unset field: Python's error */
    if (view != Py_None) {
        PyObject *vc = SLOT(t, t_vc);
        if (vc == NULL || !PyList_CheckExact(vc) || !PyTuple_CheckExact(view) || PyTuple_GET_SIZE(view) != 5)
            return PyObject_CallOneArg(fn_python_edge, t);
        if (PyList_GET_SIZE(vc) > 1) {
            int stale = PyObject_RichCompareBool(PyTuple_GET_ITEM(view, 4), PyList_GET_ITEM(vc, 1), Py_NE);
            if (stale < 0)
                return NULL;
            if (stale) {
                PyObject *again = PyObject_CallOneArg(fn_refresh_view, t);
                if (again == NULL || again != Py_None)
                    return again;
                Py_DECREF(again);
                fn = Py_None;
                rg = SLOT(t, t_requires_grad); /* refresh_view may have set it */
            }
        }
    }
    if (fn != Py_None)
        return Py_NewRef(fn);
    int wanted = rg == Py_True ? 1 : rg == Py_False ? 0 : PyObject_IsTrue(rg);
    if (wanted <= 0)
        return wanted < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *acc = SLOT(t, t_accum);
    if (acc != NULL && acc != Py_None)
        return Py_NewRef(acc);
    acc = PyObject_CallOneArg((PyObject *)acc_type, t);
    if (acc == NULL)
        return NULL;
    slot_set(t, t_accum, acc);
    return acc;
}

static PyObject *node(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "node(cls, op, rule, next, meta, saved, output, attrs)");
        return NULL;
    }
    if (node_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_native.node before configure_types");
        return NULL;
    }
    if (!PyType_Check(args[0]) || !is_op_node((PyTypeObject *)args[0])) {
        PyErr_Format(PyExc_TypeError, "_native.node: %R is not Node or a Node subclass that adds no fields",
                     args[0]);
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    PyObject *n = cls->tp_alloc(cls, 0);
    if (n == NULL)
        return NULL;
    args++; /* the fields, as Node(...) takes them */
    SLOT(n, n_op) = Py_NewRef(args[0]);
    SLOT(n, n_rule) = Py_NewRef(args[1]);
    SLOT(n, n_next) = Py_NewRef(args[2]);
    SLOT(n, n_meta) = Py_NewRef(args[3]);
    SLOT(n, n_saved) = Py_NewRef(args[4]);
    SLOT(n, n_versions) = Py_NewRef(Py_None);
    SLOT(n, n_output) = Py_NewRef(args[5]);
    SLOT(n, n_attrs) = Py_NewRef(args[6]);
    SLOT(n, n_pre_hooks) = Py_NewRef(Py_None);
    SLOT(n, n_released) = Py_NewRef(Py_False);
    SLOT(n, n_trace) = Py_NewRef(Py_None);
    return n;
}

static PyMethodDef methods[] = {
    {"configure_types", configure_types, METH_VARARGS, "configure_types(Node, AccumulateGrad, Tensor)"},
    {"configure_walk", configure_walk, METH_VARARGS,
     "configure_walk(accumulate, add, fit, check_versions, wrong_count, post_hooks): engine.py's helpers"},
    {"drain", (PyCFunction)(void (*)(void))drain, METH_FASTCALL,
     "drain(ready, pending, deps, retain_graph, create_graph, step): run ready nodes until none is left"},
    {"wrap", (PyCFunction)(void (*)(void))wrap, METH_FASTCALL,
     "wrap(data, backend, requires_grad=False): a new Tensor around a native array (dispatch.wrap)"},
    {"configure_edge", configure_edge, METH_VARARGS, "configure_edge(refresh_view, python_edge): dispatch.py's"},
    {"edge", edge, METH_O, "edge(t): the graph node gradients for t flow into, or None (dispatch.edge)"},
    {"node", (PyCFunction)(void (*)(void))node, METH_FASTCALL,
     "node(cls, op, rule, next, meta, saved, output, attrs): a graph node of class cls, as cls(op, ...) makes it"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "The core's hottest paths in C (native.py).",
                                    -1, methods};

/* A names list as a tuple of str (a new reference). */
static PyObject *names_tuple(const char *const *names) {
    Py_ssize_t n = 0;
    while (names[n] != NULL)
        n++;
    PyObject *t = PyTuple_New(n);
    for (Py_ssize_t i = 0; t != NULL && i < n; i++) {
        PyObject *s = PyUnicode_FromString(names[i]);
        if (s == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

static int add_names(PyObject *m, const char *attr, const char *const *names) {
    PyObject *t = names_tuple(names);
    int err = t == NULL ? -1 : PyModule_AddObjectRef(m, attr, t);
    Py_XDECREF(t);
    return err;
}

PyMODINIT_FUNC PyInit__native(void) {
    s_shape = PyUnicode_InternFromString("shape");
    s_dtype_of = PyUnicode_InternFromString("dtype_of");
    one = PyLong_FromLong(1);
    zero = PyLong_FromLong(0);
    if (s_shape == NULL || s_dtype_of == NULL || one == NULL || zero == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyModule_AddIntConstant(m, "ABI", ABI) < 0 || add_names(m, "NODE_FIELDS", node_names) < 0 ||
                      add_names(m, "TENSOR_FIELDS", tensor_names) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
