/* envs/atari/ale_lib.cpp: opens ale-py's build of the ALE with dlopen and calls its exported
 * ale::ALEInterface methods (see ale_lib.h for why at run time).
 *
 * How the calls are made: ALEInterface has no virtual functions, so each method is an ordinary
 * exported function whose first argument is the object (the Itanium C++ ABI that g++ and the
 * wheel's build share on x86-64 and aarch64 Linux). dlsym finds each by its mangled name and it
 * is called through a function pointer with `this` spelled out; arguments and results of class
 * type (std::string, std::filesystem::path, std::vector) are declared with their own types, so
 * the compiler passes them as the method expects (by hidden reference / return slot). Both sides
 * use the system's libstdc++ (the extension module links it dynamically), so those types have
 * one layout. The object itself lives in storage of this file: ale_interface.hpp (ALE 0.12)
 * declares four std::unique_ptr members and an int, 40 bytes, and the wheel's own bindings
 * allocate 40 (operator new(0x28) before the constructor, in 0.12.1's disassembly);
 * kObjectBytes is several times that, and the loader refuses an ALE whose version is not the
 * one launch/python-requirements.txt pins, since a later one may change the members. Exceptions ALE
 * throws (a bad ROM, a bad mode) are caught here and become error messages. */
#include "envs/atari/ale_lib.h"
#include "envs/wheel_lib.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#ifndef GB_ALE_LIB
#define GB_ALE_LIB ""
#endif
#ifndef GB_ALE_PYLIB
#define GB_ALE_PYLIB ""
#endif
#define GB_ALE_VERSION "0.12."
#define GB_ALE_HINT                                                                               \
    "install it with launch/install-deps.sh (PyPI's ale-py==0.12.1 into gearbox's Python "    \
    "environment, then configure gearbox again), or point GEARBOX_ALE_LIB at that wheel's "     \
    "ale_py/_ale_py.*.so"

namespace {

constexpr size_t kObjectBytes = 512;

using ctor_fn = void (*)(void *);
using dtor_fn = void (*)(void *);
using set_int_fn = void (*)(void *, const std::string &, int);
using set_float_fn = void (*)(void *, const std::string &, float);
using set_bool_fn = void (*)(void *, const std::string &, bool);
using load_rom_fn = void (*)(void *, std::filesystem::path);
using act_fn = int (*)(void *, int, float);
using game_over_fn = bool (*)(const void *, bool);
using truncated_fn = bool (*)(const void *);
using lives_fn = int (*)(void *);
using reset_fn = void (*)(void *);
using set_uint_fn = void (*)(void *, unsigned);
using actions_fn = std::vector<int> (*)(const void *);
using uints_fn = std::vector<unsigned> (*)(const void *);
using screen_fn = void (*)(const void *, std::vector<unsigned char> &);
using logger_fn = void (*)(int);
using welcome_fn = std::string (*)();

struct api_t {
    ctor_fn ctor;
    dtor_fn dtor;
    set_int_fn set_int;
    set_float_fn set_float;
    set_bool_fn set_bool;
    load_rom_fn load_rom;
    act_fn act;
    game_over_fn game_over;
    truncated_fn truncated;
    lives_fn lives;
    reset_fn reset;
    set_uint_fn set_mode, set_difficulty;
    actions_fn minimal_actions, legal_actions;
    uints_fn modes, difficulties;
    screen_fn grey, rgb;
} api;

std::once_flag once;
bool loaded;
char load_error[1024];
std::string roms_dir;

template <typename F> bool resolve(void *lib, const char *path, const char *sym, F *slot)
{
    void *p = dlsym(lib, sym);
    if (!p) {
        snprintf(load_error, sizeof load_error, "ALE library %s has no symbol %s: " GB_ALE_HINT,
                 path, sym);
        return false;
    }
    static_assert(sizeof p == sizeof *slot, "function and object pointers differ in size");
    std::memcpy(slot, &p, sizeof p);
    return true;
}

/* The extension module refers to Python's C API (its bindings, which gearbox never calls):
 * Python's library, loaded globally first, resolves those references. */
bool load_python(void)
{
    const char *env = getenv("GEARBOX_ALE_PYLIB");
    const char *path = env && *env ? env : GB_ALE_PYLIB;
    if (!*path)
        return true; /* then the ALE library's own load tells whether it is needed */
    if (dlopen(path, RTLD_NOW | RTLD_GLOBAL))
        return true;
    const char *why = dlerror();
    snprintf(load_error, sizeof load_error,
             "cannot open Python's library %s (%s), which ale-py's ALE library needs: install "
             "python3-dev (launch/install-deps.sh) or point GEARBOX_ALE_PYLIB at libpython",
             path, why ? why : "?");
    return false;
}

bool resolve_all(void *lib, const char *path)
{
    return resolve(lib, path, "_ZN3ale12ALEInterfaceC1Ev", &api.ctor) &&
           resolve(lib, path, "_ZN3ale12ALEInterfaceD1Ev", &api.dtor) &&
           resolve(lib, path,
                   "_ZN3ale12ALEInterface6setIntERKNSt7__cxx1112basic_stringIcSt11char_"
                   "traitsIcESaIcEEEi",
                   &api.set_int) &&
           resolve(lib, path,
                   "_ZN3ale12ALEInterface8setFloatERKNSt7__cxx1112basic_stringIcSt11char_"
                   "traitsIcESaIcEEEf",
                   &api.set_float) &&
           resolve(lib, path,
                   "_ZN3ale12ALEInterface7setBoolERKNSt7__cxx1112basic_stringIcSt11char_"
                   "traitsIcESaIcEEEb",
                   &api.set_bool) &&
           resolve(lib, path, "_ZN3ale12ALEInterface7loadROMENSt10filesystem7__cxx114pathE",
                   &api.load_rom) &&
           resolve(lib, path, "_ZN3ale12ALEInterface3actENS_6ActionEf", &api.act) &&
           resolve(lib, path, "_ZNK3ale12ALEInterface9game_overEb", &api.game_over) &&
           resolve(lib, path, "_ZNK3ale12ALEInterface14game_truncatedEv", &api.truncated) &&
           resolve(lib, path, "_ZN3ale12ALEInterface5livesEv", &api.lives) &&
           resolve(lib, path, "_ZN3ale12ALEInterface10reset_gameEv", &api.reset) &&
           resolve(lib, path, "_ZN3ale12ALEInterface7setModeEj", &api.set_mode) &&
           resolve(lib, path, "_ZN3ale12ALEInterface13setDifficultyEj", &api.set_difficulty) &&
           resolve(lib, path, "_ZNK3ale12ALEInterface19getMinimalActionSetEv",
                   &api.minimal_actions) &&
           resolve(lib, path, "_ZNK3ale12ALEInterface17getLegalActionSetEv",
                   &api.legal_actions) &&
           resolve(lib, path, "_ZNK3ale12ALEInterface17getAvailableModesEv", &api.modes) &&
           resolve(lib, path, "_ZNK3ale12ALEInterface24getAvailableDifficultiesEv",
                   &api.difficulties) &&
           resolve(lib, path, "_ZNK3ale12ALEInterface18getScreenGrayscaleERSt6vectorIhSaIhEE",
                   &api.grey) &&
           resolve(lib, path, "_ZNK3ale12ALEInterface12getScreenRGBERSt6vectorIhSaIhEE",
                   &api.rgb);
}

/* The welcome message names the version ("... (version 0.12.1+...)"). */
bool check_version(void *lib, const char *path)
{
    welcome_fn welcome = nullptr;
    logger_fn set_logger = nullptr;
    if (!resolve(lib, path, "_ZN3ale12ALEInterface14welcomeMessageB5cxx11Ev", &welcome) ||
        !resolve(lib, path, "_ZN3ale6Logger7setModeENS0_4modeE", &set_logger))
        return false;
    set_logger(2); /* ale::Logger::Error: no banner or notices on stderr in every process */
    std::string msg = welcome();
    size_t at = msg.find("version ");
    if (at == std::string::npos || msg.compare(at + 8, strlen(GB_ALE_VERSION), GB_ALE_VERSION)) {
        snprintf(load_error, sizeof load_error,
                 "ALE library %s is not ALE " GB_ALE_VERSION "x (it says \"%.200s\"): " GB_ALE_HINT,
                 path, msg.c_str());
        return false;
    }
    return true;
}

void load_once(void)
{
    const char *path;
    void *lib = load_python() ? gb_wheel_lib_open("the ALE library", "GEARBOX_ALE_LIB", GB_ALE_LIB,
                                                  0, GB_ALE_HINT, &path, load_error,
                                                  sizeof load_error)
                              : nullptr;
    if (!lib)
        return;
    if (!check_version(lib, path) || !resolve_all(lib, path))
        return; /* the library stays open: dlclose could run destructors mid-process */
    const char *roms = getenv("GEARBOX_ALE_ROMS");
    roms_dir = roms && *roms ? std::string(roms)
                             : std::filesystem::path(path).parent_path().string() + "/roms";
    loaded = true;
}

} // namespace

struct gb_ale {
    alignas(64) unsigned char obj[kObjectBytes]; /* the ale::ALEInterface */
    bool constructed;
    std::vector<unsigned char> grey, rgb; /* sized once: ALE's screen calls then never allocate */
};

extern "C" int gb_ale_load(char *err, size_t err_len)
{
    std::call_once(once, load_once);
    if (loaded)
        return 0;
    if (err && err_len)
        snprintf(err, err_len, "%s", load_error);
    return -1;
}

extern "C" const char *gb_ale_roms_dir(void)
{
    return loaded ? roms_dir.c_str() : "";
}

/* Checks value against ALE's list (the game's modes or difficulties). */
static bool listed(const std::vector<unsigned> &have, int value, std::string &names)
{
    bool found = false;
    for (unsigned v : have) {
        found = found || (int)v == value;
        names += (names.empty() ? "" : ", ") + std::to_string(v);
    }
    return found;
}

static void configure(gb_ale *a, const char *rom, int32_t seed, float repeat_p, int max_frames,
                      int mode, int difficulty)
{
    api.set_int(a->obj, "random_seed", seed);
    api.set_float(a->obj, "repeat_action_probability", repeat_p);
    api.set_int(a->obj, "frame_skip", 1);
    api.set_int(a->obj, "max_num_frames_per_episode", max_frames);
    api.set_bool(a->obj, "sound_obs", false);
    api.load_rom(a->obj, std::filesystem::path(rom));
    std::string names;
    if (mode >= 0 && !listed(api.modes(a->obj), mode, names))
        throw std::runtime_error("mode " + std::to_string(mode) + " is not one of the game's (" +
                                 names + ")");
    if (mode >= 0)
        api.set_mode(a->obj, (unsigned)mode);
    names.clear();
    if (difficulty >= 0 && !listed(api.difficulties(a->obj), difficulty, names))
        throw std::runtime_error("difficulty " + std::to_string(difficulty) +
                                 " is not one of the game's (" + names + ")");
    if (difficulty >= 0)
        api.set_difficulty(a->obj, (unsigned)difficulty);
}

extern "C" gb_ale *gb_ale_new(const char *rom, int32_t seed, float repeat_p, int max_frames,
                              int mode, int difficulty, int full_actions, int *actions,
                              int *n_actions, char *err, size_t err_len)
{
    if (gb_ale_load(err, err_len))
        return nullptr;
    gb_ale *a = new (std::nothrow) gb_ale();
    if (!a) {
        snprintf(err, err_len, "out of memory");
        return nullptr;
    }
    try {
        a->grey.resize((size_t)GB_ALE_HEIGHT * GB_ALE_WIDTH);
        a->rgb.resize((size_t)GB_ALE_HEIGHT * GB_ALE_WIDTH * 3);
        api.ctor(a->obj);
        a->constructed = true;
        configure(a, rom, seed, repeat_p, max_frames, mode, difficulty);
        std::vector<int> set = full_actions ? api.legal_actions(a->obj)
                                            : api.minimal_actions(a->obj);
        if (set.empty() || set.size() > GB_ALE_MAX_ACTIONS)
            throw std::runtime_error("the game has " + std::to_string(set.size()) + " actions");
        for (size_t i = 0; i < set.size(); i++)
            actions[i] = set[i];
        *n_actions = (int)set.size();
    } catch (const std::exception &e) {
        snprintf(err, err_len, "%s", e.what());
        gb_ale_free(a);
        return nullptr;
    }
    return a;
}

extern "C" void gb_ale_free(gb_ale *a)
{
    if (!a)
        return;
    if (a->constructed)
        api.dtor(a->obj);
    delete a;
}

extern "C" int gb_ale_act(gb_ale *a, int action)
{
    return api.act(a->obj, action, 1.0f);
}

extern "C" void gb_ale_reset(gb_ale *a)
{
    api.reset(a->obj);
}

extern "C" int gb_ale_game_over(gb_ale *a)
{
    return api.game_over(a->obj, false);
}

extern "C" int gb_ale_truncated(gb_ale *a)
{
    return api.truncated(a->obj);
}

extern "C" int gb_ale_lives(gb_ale *a)
{
    return api.lives(a->obj);
}

extern "C" void gb_ale_screen(gb_ale *a, int rgb, uint8_t *out)
{
    std::vector<unsigned char> &v = rgb ? a->rgb : a->grey;
    (rgb ? api.rgb : api.grey)(a->obj, v);
    std::memcpy(out, v.data(), v.size());
}
