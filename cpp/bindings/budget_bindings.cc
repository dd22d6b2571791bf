// Python bindings of the token budget: conversion only. Budget calls that may walk the
// vocabulary (restrict_mask, the first cost of a configuration) release the GIL.
#include "budget_bindings.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "../core/budget.h"

namespace nb = nanobind;

namespace logitgate {

namespace {
using MaskRowArray = nb::ndarray<int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
}  // namespace

void BindBudget(nb::module_& m) {
  nb::class_<Budget>(m, "Budget", "Shortest completions and budget-cut masks of one compiled grammar; thread-safe.")
      .def("__init__",
           [](Budget* self, std::shared_ptr<CompiledGrammar> g) {
             nb::gil_scoped_release release;
             new (self) Budget(std::move(g));
           },
           nb::arg("grammar"))
      .def(
          "cost",
          [](Budget& self, const Matcher& matcher) {
            if (matcher.eos_accepted()) return std::make_pair(int64_t{0}, int64_t{0});
            nb::gil_scoped_release release;
            const Budget::Cost c = self.CostOf(matcher);
            return std::make_pair(c.bytes, c.tokens);
          },
          nb::arg("matcher"),
          "(bytes, tokens) of the shortest completion from the matcher's state; tokens counts an EOS "
          "where one is needed; Budget.UNREACHABLE where the vocabulary cannot spell it.")
      .def(
          "shortest_completion",
          [](Budget& self, const Matcher& matcher) {
            std::string s = matcher.eos_accepted() ? std::string() : self.ShortestCompletion(matcher);
            return nb::bytes(s.data(), s.size());
          },
          nb::arg("matcher"), "The bytes of the shortest completion (empty when complete).")
      .def(
          "completion_tokens",
          [](Budget& self, const Matcher& matcher) {
            if (matcher.eos_accepted()) return std::vector<int32_t>();
            return self.CompletionTokens(matcher);
          },
          nb::arg("matcher"), "The fewest text tokens spelling the shortest completion (EOS not included).")
      .def(
          "exact_from",
          [](Budget& self, const Matcher& matcher, int64_t longest_token) {
            return matcher.eos_accepted() ? int64_t{0} : self.ExactFrom(matcher, longest_token);
          },
          nb::arg("matcher"), nb::arg("longest_token"),
          "Tokens left from which restrict_mask leaves the mask unchanged when no allowed token is longer "
          "than longest_token bytes (the cheap bound).")
      .def(
          "token_fits",
          [](Budget& self, const Matcher& matcher, int32_t token, int64_t remaining) {
            nb::gil_scoped_release release;
            return self.TokenFits(matcher, token, remaining);
          },
          nb::arg("matcher"), nb::arg("token"), nb::arg("remaining"),
          "True when `token` leaves room to finish within `remaining` tokens, itself included.")
      .def(
          "accept_within",
          [](Budget& self, Matcher& matcher, int32_t token, int64_t remaining) {
            if (remaining < 1) throw CoreError::Usage("remaining must be >= 1");
            const int32_t r = self.AcceptWithin(matcher, token, remaining, /*quick=*/true);
            if (r != Budget::kUndecided) return r;
            nb::gil_scoped_release release;
            return self.Settle(matcher, remaining);
          },
          nb::arg("matcher"), nb::arg("token"), nb::arg("remaining"),
          "Accept `token` when the grammar allows it and it leaves room to finish within `remaining` tokens, "
          "itself included: ACCEPTED; else the matcher is unchanged: REJECTED (the grammar refuses it) or "
          "NO_ROOM. Releases the GIL only where the completion's fewest tokens must be computed.")
      .def(
          "restrict_mask",
          [](Budget& self, const Matcher& matcher, MaskRowArray row, int64_t remaining) {
            if (row.shape(0) < static_cast<size_t>(matcher.grammar().vocab->mask_words())) {
              throw CoreError::Usage("mask row has " + std::to_string(row.shape(0)) + " words, the vocabulary needs " +
                                     std::to_string(matcher.grammar().vocab->mask_words()));
            }
            if (remaining < 1) throw CoreError::Usage("remaining must be >= 1");
            auto* words = reinterpret_cast<uint32_t*>(row.data());
            nb::gil_scoped_release release;
            return self.RestrictMask(matcher, words, remaining);
          },
          nb::arg("matcher"), nb::arg("row").noconvert(), nb::arg("remaining"),
          "Clear from `row` (the matcher's mask, int32 words) every token after which the output cannot "
          "finish within `remaining` tokens (this one included); returns how many were cleared. GIL released.")
      .def_prop_ro("bytes_are_tokens", &Budget::bytes_are_tokens,
                   "True when every byte a shortest completion may hold is a token by itself (then each costs at most one token).")
      .def_prop_ro("growth_per_byte", &Budget::growth_per_byte,
                   "How much one byte can lengthen the longest completion through a head (the cheap bound's "
                   "slope); UNREACHABLE when it could not be bounded.")
      .def_ro_static("UNREACHABLE", &Budget::kUnreachable)
      .def_prop_ro_static("REJECTED", [](nb::handle) { return int32_t{Budget::kRejected}; })
      .def_prop_ro_static("ACCEPTED", [](nb::handle) { return int32_t{Budget::kAccepted}; })
      .def_prop_ro_static("NO_ROOM", [](nb::handle) { return int32_t{Budget::kNoRoom}; });
}

}  // namespace logitgate
