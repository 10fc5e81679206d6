#pragma once

/**
 * @file
 * Philox4x32-10, the counter-based random number generator of Salmon, Moraes,
 * Dror and Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3" (SC'11).
 *
 * A counter-based generator has no sequential state: block number `n` of the
 * stream of a key is a pure function of (key, n). Any thread can compute any
 * element's random numbers without computing the ones before, so the result
 * cannot depend on how the work is split across threads or streams.
 */

#include <array>
#include <cstdint>

namespace accinte {

/** Four 32-bit words: one Philox counter, or one block of output. */
using PhiloxBlock = std::array<uint32_t, 4>;

/** The two 32-bit words of a Philox key. */
using PhiloxKey = std::array<uint32_t, 2>;

// LITERALINCLUDE START: CH08_PHILOX_ROUNDS
/**
 * Philox4x32 with 10 rounds: a bijection of the 128-bit `counter`, keyed by
 * `key`.
 *
 * NB: each round multiplies two words by fixed odd constants, keeps both
 * halves of the 64-bit products and mixes in the key; the key is bumped by
 * two Weyl constants (the golden ratio and sqrt(3) - 1, as 32-bit fractions)
 * between rounds. Ten rounds is the count the paper finds "crush-resistant"
 * with a safety margin, and the one CUDA's curand uses.
 */
inline PhiloxBlock philox4x32_10(PhiloxBlock counter, PhiloxKey key) {
  constexpr uint64_t kMultiplier0 = 0xD2511F53;
  constexpr uint64_t kMultiplier1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9;
  constexpr uint32_t kWeyl1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      // LITERALINCLUDE EMPHASIZE NEXT 2
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    // LITERALINCLUDE EMPHASIZE NEXT 2
    const uint64_t product0 = kMultiplier0 * counter[0];
    const uint64_t product1 = kMultiplier1 * counter[2];
    const auto high0 = static_cast<uint32_t>(product0 >> 32);
    const auto low0 = static_cast<uint32_t>(product0);
    const auto high1 = static_cast<uint32_t>(product1 >> 32);
    const auto low1 = static_cast<uint32_t>(product1);
    // LITERALINCLUDE EMPHASIZE NEXT 2
    counter = {high1 ^ counter[1] ^ key[0], low1, high0 ^ counter[3] ^ key[1],
               low0};
  }
  return counter;
}
// LITERALINCLUDE END: CH08_PHILOX_ROUNDS

} // namespace accinte
