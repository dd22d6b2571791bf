// Python bindings of the token budget (cpp/core/budget.h), registered by module.cc.
#pragma once

#include <nanobind/nanobind.h>

namespace logitgate {

void BindBudget(nanobind::module_& m);

}  // namespace logitgate
