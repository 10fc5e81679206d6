#pragma once

/**
 * @file
 * The one export macro of the project.
 *
 * Every shared library in torch_accinte is compiled with hidden symbol
 * visibility (`-fvisibility=hidden`), so only what is marked
 * `ACCINTE_EXPORT` is part of a library's ABI. Keeping the exported surface
 * explicit is what lets a vendor change internals without breaking the
 * libraries built on top.
 */

#if defined(_WIN32)
#define ACCINTE_EXPORT __declspec(dllexport)
#else
#define ACCINTE_EXPORT __attribute__((visibility("default")))
#endif
