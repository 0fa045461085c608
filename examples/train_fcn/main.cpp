// SPDX-License-Identifier: Apache-2.0
// Trains a small fully connected network on synthetic data with anvil's libtorch-like API and
// prints the loss going down. The data: 2048 points x ~ N(0, 1) in 32 dimensions, labelled by
// the argmax of a fixed random linear "teacher" over 4 classes, so a small FCN can fit it.
// Exits non-zero if the loss did not drop, so scripts/check_install.sh can rely on it.
#include <anvil/anvil.h>

#include <cstdio>
#include <memory>

int main() {
  using namespace anvil;
  constexpr std::int64_t kSamples = 2048, kFeatures = 32, kClasses = 4, kBatch = 64;
  constexpr int kEpochs = 8;

  manual_seed(42);
  Generator data_gen(7);
  const Tensor x = normal({kSamples, kFeatures}, 0.0, 1.0, DType::f32, &data_gen);
  const Tensor teacher = normal({kFeatures, kClasses}, 0.0, 1.0, DType::f32, &data_gen);
  Tensor y;
  {
    NoGradGuard no_grad;                // labels are data, not part of any graph
    y = argmax(matmul(x, teacher), 1);  // [N] int64 class ids
  }

  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(kFeatures, 64), nn::ReLU(), std::make_shared<nn::Linear>(64, 64),
      nn::ReLU(), std::make_shared<nn::Linear>(64, kClasses));
  optim::SGD opt(model->parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  std::printf("%s", model->str().c_str());
  std::printf("%lld parameters, %lld samples, batch %lld\n",
              static_cast<long long>(model->num_parameters()), static_cast<long long>(kSamples),
              static_cast<long long>(kBatch));

  double first_loss = 0.0, last_loss = 0.0;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    double total = 0.0;
    int batches = 0;
    for (std::int64_t start = 0; start < kSamples; start += kBatch) {
      const Tensor xb = x.slice(0, start, start + kBatch);
      const Tensor yb = y.slice(0, start, start + kBatch);
      opt.zero_grad();
      Tensor loss = cross_entropy(model->forward(xb), yb);
      loss.backward();
      opt.step();
      total += loss.item();
      ++batches;
    }
    const double mean_loss = total / batches;
    if (epoch == 0) first_loss = mean_loss;
    last_loss = mean_loss;
    std::printf("epoch %d  loss %.4f\n", epoch + 1, mean_loss);
  }

  // Accuracy on the training set, without recording a graph.
  NoGradGuard no_grad;
  model->eval();
  const Tensor pred = argmax(model->forward(x), 1);
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < kSamples; ++i)
    correct += pred.data<std::int64_t>()[i] == y.data<std::int64_t>()[i];
  std::printf("training accuracy %.1f%%\n", 100.0 * static_cast<double>(correct) / kSamples);

  if (!(last_loss < 0.5 * first_loss)) {
    std::fprintf(stderr, "train_fcn: loss did not go down (%.4f -> %.4f)\n", first_loss, last_loss);
    return 1;
  }
  return 0;
}
