// Compiled mode: trainingModel / inferenceModel, instantiated once.
#include <ipuml/runtime/training_model.hpp>
#include <ipuml/runtime/estimate_impl.hpp>
#include <ipuml/runtime/training_model_impl.hpp>
