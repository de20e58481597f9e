/* envs/gymnasium/gymnasium.c: the `gymnasium` environment plugin: any environment registered
 * with Gymnasium (env.args.id), run inside gearbox's actor workers through an embedded CPython.
 * Shipped with gearbox as gearbox_env_gymnasium.so; `env.name: gymnasium` finds it (host.c looks
 * for gearbox_env_<name>.so in the plugin directories), so only the processes that use it load
 * libpython.
 * defines: gearbox_env_interface (the plugin entry point)
 *
 * One Gymnasium environment per gearbox copy. The ring steps copies one by one through the ABI,
 * and each copy's Python object holds numpy arrays that view the copy's slices of the ring's
 * buffers: step() calls env.step(action) and writes the observation Gymnasium returns straight
 * into the ring's memory (`obs_view[...] = obs`, casting where needed), with the reward and the
 * flags; no intermediate buffer, no per-step allocation on the C side. (A Gymnasium vector
 * environment per ring group would not save work: SyncVectorEnv steps its environments in a
 * Python loop all the same, copies each observation into a batch array of its own, and resets
 * an ended episode on the next step, which would fight the ring's same-step auto-reset.)
 *
 * Render: Gymnasium decides at gym.make whether an environment draws (render_mode), so only a
 * copy made with env.args.render_mode: rgb_array renders (`gearbox eval --video` asks for it).
 * Its create() draws one frame after a seeded reset to learn the frame size for the spec (the
 * first reset is seeded again, so the episodes are the same); render() copies Gymnasium's frame
 * (its first three channels) into the caller's buffer. Other copies declare a render size of
 * 0 x 0 and never import the drawing library (pygame for classic control).
 *
 * The interpreter: initialized once per process (pthread_once), from the Python whose
 * site-packages hold gymnasium: $GEARBOX_GYMNASIUM_PYTHON, else env.args.python_path, else the
 * interpreter gearbox was built with (GEARBOX_PYTHON, gearbox's virtual environment). Python's
 * signal handlers are not installed (gearbox's own stay). After initialization the main thread
 * releases the GIL; every call takes it with PyGILState_Ensure, so copies may be created and
 * stepped from any thread (a copy is still used by one thread at a time, as env.h says).
 * The plugin is linked with -z nodelete: dlclose leaves it (and the interpreter) in place. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "envs/env.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GB_GYMNASIUM_DEFAULT_PYTHON
#define GB_GYMNASIUM_DEFAULT_PYTHON "/usr/bin/python3"
#endif

/* The Python side: making an environment, translating its spaces, and the per-copy object whose
 * methods reset and step it into numpy views of the ring's buffers. */
static const char helper_source[] =
    "import ast, os, sys\n"
    "import numpy as np\n"
    "import gymnasium as gym\n"
    "from gymnasium import spaces\n"
    "\n"
    "def _value(text):\n"
    "    t = text.strip()\n"
    "    low = t.lower()\n"
    "    if low == 'true': return True\n"
    "    if low == 'false': return False\n"
    "    if low in ('null', 'none', '~'): return None\n"
    "    try:\n"
    "        return ast.literal_eval(t)\n"
    "    except (ValueError, SyntaxError):\n"
    "        return text\n"
    "\n"
    "def _box_bounds(space, dtype):\n"
    "    low = np.broadcast_to(space.low, space.shape).astype(dtype).reshape(-1)\n"
    "    high = np.broadcast_to(space.high, space.shape).astype(dtype).reshape(-1)\n"
    "    return np.ascontiguousarray(low), np.ascontiguousarray(high)\n"
    "\n"
    "class Copy:\n"
    "    def __init__(self, env_id, keys, values, seed):\n"
    "        kwargs = {k: _value(v) for k, v in zip(keys, values)}\n"
    "        if kwargs.get('render_mode') == 'rgb_array':\n"
    "            # pygame (classic control's drawing): no greeting on stdout (gearbox eval --json\n"
    "            # writes there), no display or sound device wanted for off-screen frames.\n"
    "            for k in ('PYGAME_HIDE_SUPPORT_PROMPT', 'SDL_VIDEODRIVER', 'SDL_AUDIODRIVER'):\n"
    "                os.environ.setdefault(k, '1' if k.startswith('PYGAME') else 'dummy')\n"
    "        limit = kwargs.pop('max_episode_steps', None)\n"
    "        # max_episode_steps=-1: no TimeLimit wrapper; gearbox's host applies the limit.\n"
    "        self.env = gym.make(env_id, max_episode_steps=-1, **kwargs)\n"
    "        if limit is None:\n"
    "            limit = gym.spec(env_id.split(':')[-1]).max_episode_steps\n"
    "        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:\n"
    "            if limit is not None:\n"
    "                raise ValueError('max_episode_steps must be an integer >= 0, '\n"
    "                                 f'not {limit!r}')\n"
    "            limit = 0\n"
    "        self.limit = limit\n"
    "        self.seed = seed\n"
    "        self.bound = None\n"
    "        o = self.env.observation_space\n"
    "        if isinstance(o, spaces.Box):\n"
    "            shape = tuple(o.shape) or (1,)\n"
    "            if len(shape) > 4:\n"
    "                raise TypeError(f'observation space {o} has {len(shape)} dimensions '\n"
    "                                '(gearbox takes at most 4)')\n"
    "            if not (np.issubdtype(o.dtype, np.number) or o.dtype == np.bool_):\n"
    "                raise TypeError(f'observation space {o} has dtype {o.dtype}')\n"
    "            # gearbox's models take float32 or uint8: every other type becomes float32.\n"
    "            self.obs_dtype = np.dtype(np.uint8 if o.dtype == np.uint8 else np.float32)\n"
    "            self.obs_low, self.obs_high = _box_bounds(o, np.float64)\n"
    "        elif isinstance(o, spaces.Discrete):\n"
    "            shape = (1,)\n"
    "            self.obs_dtype = np.dtype(np.float32)\n"
    "            self.obs_low = np.array([float(o.start)])\n"
    "            self.obs_high = np.array([float(o.start + o.n - 1)])\n"
    "        else:\n"
    "            raise TypeError(f'observation space {o} ({type(o).__name__}) is not '\n"
    "                            'supported: gearbox takes Box and Discrete')\n"
    "        self.obs_shape = shape\n"
    "        self.render_hw = (0, 0)\n"
    "        if kwargs.get('render_mode') == 'rgb_array':\n"
    "            # The frame size goes into the spec now: reset (seeded as the first reset will\n"
    "            # be again) and draw one frame.\n"
    "            self.env.reset(seed=seed)\n"
    "            self.render_hw = self._frame().shape[:2]\n"
    "        a = self.env.action_space\n"
    "        if isinstance(a, spaces.Discrete):\n"
    "            self.discrete, self.n, self.start = True, int(a.n), int(a.start)\n"
    "            self.act_low = self.act_high = None\n"
    "        elif isinstance(a, spaces.Box) and np.issubdtype(a.dtype, np.floating):\n"
    "            self.discrete, self.n, self.start = False, int(np.prod(a.shape)), 0\n"
    "            self.act_shape, self.act_dtype = a.shape, a.dtype\n"
    "            self.act_low, self.act_high = _box_bounds(a, np.float32)\n"
    "            if not np.all(np.isfinite(np.concatenate([self.act_low, self.act_high]))):\n"
    "                raise TypeError(f'action space {a} is unbounded: gearbox clips '\n"
    "                                'continuous actions to finite bounds')\n"
    "        else:\n"
    "            raise TypeError(f'action space {a} ({type(a).__name__}) is not '\n"
    "                            'supported: gearbox takes Discrete and float Box actions')\n"
    "\n"
    "    def bind(self, obs, actions, rewards, terminated, truncated):\n"
    "        # Views of this copy's slices of the caller's buffers (memoryviews made in C).\n"
    "        self.obs = np.frombuffer(obs, dtype=self.obs_dtype).reshape(self.obs_shape)\n"
    "        self.act = np.frombuffer(actions, dtype=np.int32 if self.discrete else np.float32)\n"
    "        self.rew = np.frombuffer(rewards, dtype=np.float32)\n"
    "        self.term = np.frombuffer(terminated, dtype=np.uint8)\n"
    "        self.trunc = np.frombuffer(truncated, dtype=np.uint8)\n"
    "\n"
    "    def reset(self):\n"
    "        o, _ = self.env.reset(seed=self.seed)  # seeded once; None: the stream goes on\n"
    "        self.seed = None\n"
    "        self.obs[...] = np.reshape(o, self.obs_shape)\n"
    "\n"
    "    def step(self):\n"
    "        if self.discrete:\n"
    "            a = int(self.act[0]) + self.start\n"
    "        else:\n"
    "            a = self.act.reshape(self.act_shape).astype(self.act_dtype)\n"
    "        o, r, te, tr, _ = self.env.step(a)\n"
    "        self.obs[...] = np.reshape(o, self.obs_shape)\n"
    "        self.rew[0] = r\n"
    "        self.term[0] = bool(te)\n"
    "        self.trunc[0] = bool(tr)\n"
    "\n"
    "    def _frame(self):\n"
    "        f = self.env.render()\n"
    "        if not isinstance(f, np.ndarray) or f.ndim != 3 or f.shape[2] not in (3, 4):\n"
    "            raise TypeError('render() with render_mode rgb_array gave '\n"
    "                            f'{getattr(f, \"shape\", type(f).__name__)}, not an RGB frame')\n"
    "        return f\n"
    "\n"
    "    def render(self, rgb):\n"
    "        f = self._frame()\n"
    "        if f.shape[:2] != self.render_hw:\n"
    "            raise ValueError(f'render() gave a {f.shape[0]} x {f.shape[1]} frame after '\n"
    "                             f'{self.render_hw[0]} x {self.render_hw[1]} ones')\n"
    "        out = np.frombuffer(rgb, dtype=np.uint8).reshape(self.render_hw + (3,))\n"
    "        out[...] = f[..., :3]\n"
    "\n"
    "    def close(self):\n"
    "        self.env.close()\n";

/* Process-wide interpreter state, set once by py_init. */
static pthread_once_t py_once = PTHREAD_ONCE_INIT;
static char py_init_error[2048];
static char py_python[512];      /* the interpreter whose environment we run */
static PyObject *py_copy_class; /* helper Copy class (strong reference, never released) */

/* One gearbox copy. */
typedef struct gym_copy {
    PyObject *obj;      /* the helper's Copy */
    PyObject *m_reset;  /* bound methods, looked up once */
    PyObject *m_step;
    PyObject *m_render;
    const void *bound_obs; /* the buffers the views were made for */
    char name[128];
    int32_t render_h, render_w; /* spec's render size; 0 when not made to render */
    double *obs_low, *obs_high; /* spec bounds, owned */
    float *act_low, *act_high;
} gym_copy;

/* Formats the pending Python exception as "Type: message" into out and clears it. */
static void py_error_text(char *out, size_t cap)
{
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    const char *tname = type ? ((PyTypeObject *)type)->tp_name : "error";
    PyObject *s = value ? PyObject_Str(value) : NULL;
    const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
    if (!msg)
        PyErr_Clear();
    snprintf(out, cap, "%s: %s", tname, msg ? msg : "(no message)");
    Py_XDECREF(s);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

static void fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(char *err, size_t cap, const char *fmt, ...)
{
    if (!err || !cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* Makes libpython's symbols global: the plugin is loaded RTLD_LOCAL, and so would its libpython
 * be, but extension modules (numpy's) resolve Py* symbols from the global scope. */
static void promote_libpython(void)
{
    Dl_info info;
    void *sym = (void *)&Py_InitializeFromConfig;
    if (dladdr(sym, &info) && info.dli_fname)
        (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

static void py_init(void)
{
    promote_libpython();
    int hosted = Py_IsInitialized(); /* the host process embeds Python itself */
    PyGILState_STATE hosted_gil = PyGILState_UNLOCKED;
    if (!hosted) {
        PyConfig config;
        PyConfig_InitPythonConfig(&config);
        config.install_signal_handlers = 0;
        config.parse_argv = 0;
        config.user_site_directory = 0;
        /* Setting the executable makes getpath read its pyvenv.cfg: a virtual environment's
         * site-packages (and, with include-system-site-packages, Debian's) come on sys.path. */
        PyStatus st = PyConfig_SetBytesString(&config, &config.executable, py_python);
        if (!PyStatus_Exception(st))
            st = PyConfig_SetBytesString(&config, &config.program_name, py_python);
        if (!PyStatus_Exception(st))
            st = Py_InitializeFromConfig(&config);
        PyConfig_Clear(&config);
        if (PyStatus_Exception(st)) {
            snprintf(py_init_error, sizeof py_init_error, "cannot start Python %s: %s",
                     py_python, st.err_msg ? st.err_msg : "unknown error");
            return;
        }
    } else {
        hosted_gil = PyGILState_Ensure();
    }
    PyObject *globals = PyDict_New();
    PyObject *res = NULL;
    if (globals && PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) == 0)
        res = PyRun_String(helper_source, Py_file_input, globals, globals);
    if (!res) {
        char text[768];
        py_error_text(text, sizeof text);
        snprintf(py_init_error, sizeof py_init_error,
                 "cannot import gymnasium with Python %s: %s (install it with "
                 "`launch/install-deps.sh gymnasium`, then configure and build gearbox again; "
                 "or point GEARBOX_GYMNASIUM_PYTHON or env.args.python_path at a Python that "
                 "has it)",
                 py_python, text);
    } else {
        py_copy_class = PyDict_GetItemString(globals, "Copy");
        Py_XINCREF(py_copy_class);
    }
    Py_XDECREF(res);
    Py_XDECREF(globals);
    /* From now on every call takes the GIL with PyGILState_Ensure. */
    if (hosted)
        PyGILState_Release(hosted_gil);
    else
        (void)PyEval_SaveThread();
}

static void gym_destroy(void *p)
{
    gym_copy *c = p;
    if (!c)
        return;
    if (c->obj) {
        PyGILState_STATE g = PyGILState_Ensure();
        PyObject *r = PyObject_CallMethod(c->obj, "close", NULL);
        if (!r)
            PyErr_Clear();
        Py_XDECREF(r);
        Py_XDECREF(c->m_reset);
        Py_XDECREF(c->m_step);
        Py_XDECREF(c->m_render);
        Py_DECREF(c->obj);
        PyGILState_Release(g);
    }
    free(c->obs_low);
    free(c->obs_high);
    free(c->act_low);
    free(c->act_high);
    free(c);
}

/* Reads an attribute as a C long; -1 with a Python error set on failure. */
static long attr_long(PyObject *o, const char *name)
{
    PyObject *v = PyObject_GetAttrString(o, name);
    if (!v)
        return -1;
    long x = PyLong_AsLong(v);
    Py_DECREF(v);
    return x;
}

/* Copies numpy array attribute `name` (contiguous, n elements of elem bytes) into a new malloc'd
 * buffer. Returns it, or NULL with a Python error set (or none when out of memory). */
static void *attr_array(PyObject *o, const char *name, size_t n, size_t elem)
{
    PyObject *v = PyObject_GetAttrString(o, name);
    if (!v)
        return NULL;
    Py_buffer view;
    void *out = NULL;
    if (PyObject_GetBuffer(v, &view, PyBUF_C_CONTIGUOUS) == 0) {
        if ((size_t)view.len == n * elem && (out = malloc(n * elem)))
            memcpy(out, view.buf, n * elem);
        else if ((size_t)view.len != n * elem)
            PyErr_Format(PyExc_ValueError, "%s has %zd bytes, expected %zu", name, view.len,
                         n * elem);
        PyBuffer_Release(&view);
    }
    Py_DECREF(v);
    return out;
}

/* Fills spec from the helper object's translated spaces. Returns 0, or -1 with a Python error. */
static int read_spec(gym_copy *c, gb_env_spec *spec)
{
    PyObject *o = c->obj;
    memset(spec, 0, sizeof *spec);
    spec->agents = 1;
    PyObject *shape = PyObject_GetAttrString(o, "obs_shape");
    if (!shape)
        return -1;
    Py_ssize_t nd = PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : 0;
    size_t numel = 1;
    for (Py_ssize_t i = 0; i < nd && i < GB_ENV_MAX_DIMS; i++) {
        spec->obs.shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        numel *= (size_t)(spec->obs.shape[i] > 0 ? spec->obs.shape[i] : 1);
    }
    Py_DECREF(shape);
    spec->obs.ndim = (int32_t)nd;
    PyObject *dt = PyObject_GetAttrString(o, "obs_dtype");
    if (!dt)
        return -1;
    PyObject *dts = PyObject_Str(dt);
    Py_DECREF(dt);
    if (!dts)
        return -1;
    spec->obs.dtype = strcmp(PyUnicode_AsUTF8(dts), "uint8") == 0 ? GB_ENV_UINT8 : GB_ENV_FLOAT32;
    Py_DECREF(dts);
    if (!(c->obs_low = attr_array(o, "obs_low", numel, sizeof(double))) ||
        !(c->obs_high = attr_array(o, "obs_high", numel, sizeof(double))))
        return -1;
    spec->obs.low = c->obs_low;
    spec->obs.high = c->obs_high;
    long discrete = attr_long(o, "discrete"), n = attr_long(o, "n"), limit = attr_long(o, "limit");
    if (PyErr_Occurred())
        return -1;
    spec->action.n = (int32_t)n;
    if (discrete) {
        spec->action.kind = GB_ENV_SPACE_DISCRETE;
    } else {
        spec->action.kind = GB_ENV_SPACE_BOX;
        if (!(c->act_low = attr_array(o, "act_low", (size_t)n, sizeof(float))) ||
            !(c->act_high = attr_array(o, "act_high", (size_t)n, sizeof(float))))
            return -1;
        spec->action.low = c->act_low;
        spec->action.high = c->act_high;
    }
    spec->max_episode_steps = limit;
    /* render size: (0, 0) unless the copy was made with render_mode rgb_array */
    PyObject *hw = PyObject_GetAttrString(o, "render_hw");
    if (!hw)
        return -1;
    if (PyTuple_Check(hw) && PyTuple_GET_SIZE(hw) == 2) {
        spec->render_height = (int32_t)PyLong_AsLong(PyTuple_GET_ITEM(hw, 0));
        spec->render_width = (int32_t)PyLong_AsLong(PyTuple_GET_ITEM(hw, 1));
    }
    Py_DECREF(hw);
    return PyErr_Occurred() ? -1 : 0;
}

static void *gym_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                        size_t err_len)
{
    const char *id = gb_env_arg(args, "id");
    if (!id || !id[0]) {
        fail(err, err_len, "env.args.id is required (a registered Gymnasium id such "
                           "as CartPole-v1, or module:Id to import the module that registers it)");
        return NULL;
    }
    /* The interpreter: fixed by the first create() in this process. */
    const char *want = getenv("GEARBOX_GYMNASIUM_PYTHON");
    if (!want || !want[0])
        want = gb_env_arg(args, "python_path");
    if (!want || !want[0])
        want = GB_GYMNASIUM_DEFAULT_PYTHON;
    static pthread_mutex_t pick = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&pick);
    if (!py_python[0])
        snprintf(py_python, sizeof py_python, "%s", want);
    pthread_mutex_unlock(&pick);
    pthread_once(&py_once, py_init);
    if (py_init_error[0]) {
        fail(err, err_len, "%s", py_init_error);
        return NULL;
    }
    if (strcmp(want, py_python) != 0) {
        fail(err, err_len, "this process already runs Python %s; cannot switch to %s",
             py_python, want);
        return NULL;
    }
    gym_copy *c = calloc(1, sizeof *c);
    if (!c) {
        fail(err, err_len, "out of memory");
        return NULL;
    }
    snprintf(c->name, sizeof c->name, "%s", id);
    PyGILState_STATE g = PyGILState_Ensure();
    int n = 0;
    for (int32_t i = 0; i < args->count; i++)
        if (strcmp(args->keys[i], "id") != 0 && strcmp(args->keys[i], "python_path") != 0)
            n++;
    PyObject *keys = PyList_New(n), *values = PyList_New(n);
    int ok = keys && values;
    for (int32_t i = 0, j = 0; ok && i < args->count; i++) {
        if (strcmp(args->keys[i], "id") == 0 || strcmp(args->keys[i], "python_path") == 0)
            continue;
        PyObject *k = PyUnicode_FromString(args->keys[i]);
        PyObject *v = PyUnicode_FromString(args->values[i]);
        ok = k && v;
        if (ok) {
            PyList_SET_ITEM(keys, j, k);
            PyList_SET_ITEM(values, j, v);
            j++;
        } else {
            Py_XDECREF(k);
            Py_XDECREF(v);
        }
    }
    if (ok)
        c->obj = PyObject_CallFunction(py_copy_class, "sOOK", id, keys, values,
                                       (unsigned long long)seed);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    if (c->obj) {
        c->m_reset = PyObject_GetAttrString(c->obj, "reset");
        c->m_step = PyObject_GetAttrString(c->obj, "step");
        c->m_render = PyObject_GetAttrString(c->obj, "render");
    }
    if (!c->obj || !c->m_reset || !c->m_step || !c->m_render || read_spec(c, spec) != 0) {
        char text[768];
        if (PyErr_Occurred())
            py_error_text(text, sizeof text);
        else
            snprintf(text, sizeof text, "out of memory");
        /* a missing package: say which Python lacks it (pygame, for render_mode rgb_array) */
        int missing = strstr(text, "DependencyNotInstalled") == text ||
                      strstr(text, "ModuleNotFoundError") == text;
        fail(err, err_len, "%s: %s%s%s%s", id, text, missing ? " (in Python " : "",
             missing ? py_python : "", missing ? ")" : "");
        PyGILState_Release(g);
        gym_destroy(c);
        return NULL;
    }
    c->render_h = spec->render_height;
    c->render_w = spec->render_width;
    PyGILState_Release(g);
    return c;
}

/* Points the copy's numpy views at buf (again when the host attached other buffers).
 * GIL held. Returns 0 or -1 with a Python error set. */
static int bind_views(gym_copy *c, const gb_env_buffers *buf)
{
    if (c->bound_obs == buf->obs)
        return 0;
    PyObject *dt = PyObject_GetAttrString(c->obj, "obs_dtype");
    PyObject *isz = dt ? PyObject_GetAttrString(dt, "itemsize") : NULL;
    PyObject *shape = PyObject_GetAttrString(c->obj, "obs_shape");
    long discrete = attr_long(c->obj, "discrete"), n = attr_long(c->obj, "n");
    if (!isz || !shape || PyErr_Occurred()) {
        Py_XDECREF(dt);
        Py_XDECREF(isz);
        Py_XDECREF(shape);
        return -1;
    }
    size_t obs_bytes = (size_t)PyLong_AsLong(isz);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape); i++)
        obs_bytes *= (size_t)PyLong_AsLong(PyTuple_GET_ITEM(shape, i));
    Py_DECREF(dt);
    Py_DECREF(isz);
    Py_DECREF(shape);
    size_t act_bytes = discrete ? sizeof(int32_t) : (size_t)n * sizeof(float);
    PyObject *r = PyObject_CallMethod(
        c->obj, "bind", "NNNNN",
        PyMemoryView_FromMemory(buf->obs, (Py_ssize_t)obs_bytes, PyBUF_WRITE),
        PyMemoryView_FromMemory((char *)buf->actions, (Py_ssize_t)act_bytes, PyBUF_READ),
        PyMemoryView_FromMemory((char *)buf->rewards, sizeof(float), PyBUF_WRITE),
        PyMemoryView_FromMemory((char *)buf->terminated, 1, PyBUF_WRITE),
        PyMemoryView_FromMemory((char *)buf->truncated, 1, PyBUF_WRITE));
    if (!r)
        return -1;
    Py_DECREF(r);
    c->bound_obs = buf->obs;
    return 0;
}

/* Calls method m after binding; prints a Python failure to stderr (the ring reports the copy).
 * Returns 0 or -1. */
static int call(gym_copy *c, PyObject *m, const gb_env_buffers *buf, const char *what)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = 0;
    PyObject *r = bind_views(c, buf) == 0 ? PyObject_CallNoArgs(m) : NULL;
    if (!r) {
        char text[768];
        py_error_text(text, sizeof text);
        fprintf(stderr, "gymnasium: %s: %s failed: %s\n", c->name, what, text);
        rc = -1;
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
    return rc;
}

static int gym_reset(void *p, const gb_env_buffers *buf)
{
    gym_copy *c = p;
    return call(c, c->m_reset, buf, "reset");
}

static int gym_step(void *p, const gb_env_buffers *buf)
{
    gym_copy *c = p;
    return call(c, c->m_step, buf, "step");
}

/* Draws the copy's current state (Gymnasium's render() with render_mode rgb_array) into rgb,
 * render_h x render_w x 3 bytes. Returns 0, or -1 (said on stderr) when the copy was not made to
 * render or Gymnasium failed. */
static int gym_render(void *p, uint8_t *rgb)
{
    gym_copy *c = p;
    if (c->render_h < 1 || c->render_w < 1) {
        fprintf(stderr, "gymnasium: %s: render: the copy was made without render_mode: "
                        "rgb_array\n", c->name);
        return -1;
    }
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *view = PyMemoryView_FromMemory(
        (char *)rgb, (Py_ssize_t)c->render_h * c->render_w * 3, PyBUF_WRITE);
    PyObject *r = view ? PyObject_CallOneArg(c->m_render, view) : NULL;
    int rc = 0;
    if (!r) {
        char text[768];
        py_error_text(text, sizeof text);
        fprintf(stderr, "gymnasium: %s: render failed: %s\n", c->name, text);
        rc = -1;
    }
    Py_XDECREF(r);
    Py_XDECREF(view);
    PyGILState_Release(g);
    return rc;
}

static const gb_env_interface iface = {
    GB_ENV_ABI_VERSION,
    sizeof(gb_env_interface),
    "gymnasium",
    "any Gymnasium environment (env.args.id) through embedded CPython; Box and Discrete spaces",
    gym_create,
    gym_reset,
    gym_step,
    gym_destroy,
    gym_render,
};

GB_ENV_EXPORT const gb_env_interface *gearbox_env_interface(void)
{
    return &iface;
}
