// SPDX-License-Identifier: Apache-2.0
// The driver loop of the op tests (tests/helpers/driver_loop.h).
#include "helpers/driver_loop.h"

#include "helpers/variant_harness.h"

namespace anvil::test {

int run_driver_loop(const harness::OpDriver& driver, const std::vector<nn::NamedProblem>& problems,
                    const Device& device, const DriverLoopOptions& options,
                    std::map<std::string, int>* ran) {
  VariantHarness harness(driver.table(), device.type, options.minimum);
  if (!options.run_ref) harness.skip_ref();
  std::uint64_t seed = options.seed;
  int pairs = 0;
  for (const auto& np : problems)
    for (const OpProblem& pass : driver.passes(harness::on_device(np.problem, device))) {
      const auto c = driver.make_case(pass, seed++);
      harness.run(driver, pass, np.name, [&c](const std::string& variant) {
        c->prepare(variant);
        c->run();
        return c->check();
      });
      ++pairs;
    }
  CHECK(harness.finish() == 0);
  if (ran != nullptr) *ran = harness.tally().ran;
  return pairs;
}

int run_driver_group(const harness::OpDriver& driver, const std::string& group,
                     const Device& device, bool run_ref) {
  DriverLoopOptions o;
  o.minimum = driver.minimum_problems(group, device.type);
  o.run_ref = run_ref;
  return run_driver_loop(driver, driver.group(group), device, o);
}

}  // namespace anvil::test
