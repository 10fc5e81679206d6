#pragma once

/**
 * @file
 * The dtypes the device reports to `torch.accelerator.get_device_capability`,
 * beyond chapter 01's dense ones.
 *
 * The guard (guard.cpp) reports the dtypes a tensor on the device can have
 * and convert. A later chapter that makes more dtypes work, with kernels of
 * its own (chapter 16's quantized dtypes), adds them here when its objects
 * are linked in, so that the report grows with the stage and chapter 01's
 * guard stays as it is.
 */

#include <accinte/export.h>

#include <c10/core/ScalarType.h>

#include <initializer_list>

namespace accinte {

/** Adds `dtypes` to what the guard reports for every accinte device. */
ACCINTE_EXPORT void addCapabilityDtypes(
    std::initializer_list<c10::ScalarType> dtypes);

} // namespace accinte
