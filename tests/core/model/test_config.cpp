// Model config sources (presets, config.json, flags) and validation.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "core/util/error.hpp"
#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"

using namespace gs;

TEST(Presets, DefaultIsTheSeedFiveB) {
  ModelConfig c = default_config();
  EXPECT_EQ(c.name, "codonfm-5b");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 16384);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.tokens(), 31 * 512);
  EXPECT_FALSE(c.gated_mlp);
}

TEST(Presets, AllValidAndUnknownNamed) {
  ASSERT_GE(presets().size(), 4u);
  for (const Preset& p : presets()) EXPECT_NO_THROW(build_model_plan(p.config)) << p.name;
  EXPECT_EQ(find_preset("llama-3-70b").config.kv_heads(), 8);
  try {
    find_preset("gpt-5");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model preset 'gpt-5'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("llama-3-8b"), std::string::npos);
  }
}

TEST(HfConfig, LlamaStyle) {
  const char* js = R"({"model_type":"llama","hidden_size":4096,"intermediate_size":14336,
    "num_attention_heads":32,"num_key_value_heads":8,"num_hidden_layers":32,"vocab_size":128256,
    "hidden_act":"silu","tie_word_embeddings":false})";
  ModelConfig c = parse_hf_config(js, "cfg.json");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.kv_heads(), 8);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_TRUE(c.gated_mlp);
  EXPECT_EQ(c.micro_batch_size, kDefaultConfigMicroBatch);
  // no max_position_embeddings: LlamaConfig's default 2048 caps the default sequence, noted
  EXPECT_EQ(c.sequence_length, 2048);
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_EQ(c.notes[0], "cfg.json has no 'max_position_embeddings': LlamaConfig's default 2048 used");
  c = parse_hf_config(std::string(js).insert(1, "\"max_position_embeddings\":131072,"), "cfg.json");
  EXPECT_EQ(c.sequence_length, kDefaultConfigSequence);
  EXPECT_TRUE(c.notes.empty());
}

TEST(HfConfig, GeluIsNotGatedAndHeadDimRead) {
  const char* js = R"({"hidden_size":3072,"intermediate_size":12288,"num_attention_heads":16,
    "num_hidden_layers":28,"head_dim":256,"hidden_act":"gelu"})";
  ModelConfig c = parse_hf_config(js, "cfg.json");
  EXPECT_FALSE(c.gated_mlp);
  EXPECT_EQ(c.head_dimension(), 256);
  EXPECT_EQ(c.vocab_size, 0);
}

// GELU names decide nothing on their own: StarCoder2 (gelu_pytorch_tanh) is not gated, Gemma
// (the same activation) is, by architecture.
TEST(HfConfig, GatingFollowsArchitectureForGeluNames) {
  const char* starcoder = R"({"model_type":"starcoder2","hidden_size":6144,"intermediate_size":24576,
    "num_attention_heads":48,"num_key_value_heads":4,"num_hidden_layers":40,"hidden_act":"gelu_pytorch_tanh"})";
  EXPECT_FALSE(parse_hf_config(starcoder, "sc2.json").gated_mlp);
  const char* gemma = R"({"model_type":"gemma","hidden_size":3072,"intermediate_size":24576,
    "num_attention_heads":16,"num_hidden_layers":28,"head_dim":256,"hidden_act":"gelu_pytorch_tanh"})";
  EXPECT_TRUE(parse_hf_config(gemma, "gemma.json").gated_mlp);
}

// Bad values in config.json are named as config fields (not flags), and never wrap or throw
// anything but a UsageError.
TEST(HfConfig, BadValuesNameTheFileAndField) {
  auto error_of = [](const std::string& js) {
    try {
      parse_hf_config(js, "cfg.json");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string base = R"("intermediate_size":16384,"num_attention_heads":32,"num_hidden_layers":24)";
  EXPECT_EQ(error_of("{\"hidden_size\":-4096," + base + "}"), "cfg.json: 'hidden_size' must be > 0, got -4096");
  EXPECT_EQ(error_of("{\"hidden_size\":18446744073709551615," + base + "}"),
            "cfg.json: 'hidden_size' = 18446744073709551615 is too large");
  EXPECT_NE(error_of("{\"hidden_size\":1e400," + base + "}"), "no error");  // parse error, named
  EXPECT_EQ(error_of("{\"hidden_size\":1e30," + base + "}"), "cfg.json: 'hidden_size' must be an integer, got 1e+30");
  EXPECT_EQ(error_of("{\"hidden_size\":4096,\"num_key_value_heads\":-1," + base + "}"),
            "cfg.json: 'num_key_value_heads' must be >= 0, got -1");
  // model_type of the wrong type is ignored, not an exception.
  EXPECT_EQ(parse_hf_config("{\"model_type\":5,\"hidden_size\":4096," + base + "}", "cfg.json").name,
            "cfg [hidden 4096, 24 layers]");
}

TEST(HfConfig, FlagsOverrideFileValues) {
  ModelConfig c = parse_hf_config(R"({"hidden_size":4096,"intermediate_size":14336,"num_attention_heads":32,
    "num_hidden_layers":32,"hidden_act":"silu"})", "x");
  ModelOverrides o;
  o.num_hidden_layers = 2;
  o.micro_batch_size = 4;
  o.sequence_length = 2048;
  o.gated_mlp = false;
  apply_overrides(c, o);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.tokens(), 8192);
  EXPECT_FALSE(c.gated_mlp);
  EXPECT_EQ(c.hidden_size, 4096);
}

TEST(HfConfig, NestedTextConfig) {
  ModelConfig c = parse_hf_config(R"({"model_type":"x","text_config":{"hidden_size":2048,"intermediate_size":8192,
    "num_attention_heads":16,"num_hidden_layers":4}})", "x");
  EXPECT_EQ(c.hidden_size, 2048);
}

TEST(HfConfig, Malformed) {
  EXPECT_THROW(parse_hf_config("{not json", "x"), UsageError);
  EXPECT_THROW(parse_hf_config("[1,2]", "x"), UsageError);
  // Missing required fields are refused before planning (a flag may still fill them: see
  // AttentionLayout.FlagsFillMissingRequiredFields).
  EXPECT_THROW(build_model_plan(parse_hf_config(R"({"hidden_size":4096})", "x")), UsageError);
  EXPECT_THROW(parse_hf_config(R"({"hidden_size":"big","intermediate_size":1,"num_attention_heads":1,"num_hidden_layers":1})", "x"), UsageError);
  EXPECT_THROW(parse_hf_config(R"({"hidden_size":40.5,"intermediate_size":1,"num_attention_heads":1,"num_hidden_layers":1})", "x"), UsageError);
  EXPECT_THROW(load_hf_config("/nonexistent/config.json"), UsageError);
}

TEST(Validate, BadConfigs) {
  auto bad = [](auto mutate, const char* needle) {
    ModelConfig c = default_config();
    mutate(c);
    try {
      validate(c);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  bad([](ModelConfig& c) { c.hidden_size = 0; }, "--hidden_size must be > 0");
  bad([](ModelConfig& c) { c.num_hidden_layers = -3; }, "--num_hidden_layers must be > 0");
  bad([](ModelConfig& c) { c.hidden_size = int64_t{1} << 40; }, "too large");
  bad([](ModelConfig& c) { c.micro_batch_size = 100000; c.sequence_length = 100000; }, "tokens is too large");
  bad([](ModelConfig& c) { c.num_attention_heads = 30; }, "does not divide hidden_size");
  bad([](ModelConfig& c) { c.num_key_value_heads = 5; }, "does not divide num_attention_heads");
  bad([](ModelConfig& c) { c.tensor_parallel = 0; }, "--tensor-parallel must be > 0");
  bad([](ModelConfig& c) { c.vocab_divisible_by = -1; }, "--make-vocab-size-divisible-by must be >= 0");
}

TEST(Recipes, FormatsPerRoleAndAccumulation) {
  Plan p = build_model_plan(default_config());
  RecipeOptions o;
  const Gemm& fprop = p.gemms[0];
  const Gemm& dgrad = p.gemms[4];
  const Gemm& wgrad = p.gemms[8];
  Recipe r = make_recipe(Precision::FP8Current, dgrad, o);
  EXPECT_EQ(r.a.format, ElemFormat::E5M2);  // dY
  EXPECT_EQ(r.b.format, ElemFormat::E4M3);  // W
  EXPECT_FALSE(r.fast_accum);
  EXPECT_TRUE(make_recipe(Precision::FP8Current, fprop, o).fast_accum);
  o.fp8_format = Fp8Format::E4M3;
  EXPECT_EQ(make_recipe(Precision::FP8Current, dgrad, o).a.format, ElemFormat::E4M3);
  o = {};
  Recipe b = make_recipe(Precision::FP8Block, fprop, o);
  EXPECT_EQ(b.a.scaling, Scaling::Block1x128);
  EXPECT_EQ(b.b.scaling, Scaling::Block128x128);
  Recipe bw = make_recipe(Precision::FP8Block, wgrad, o);
  EXPECT_EQ(bw.a.scaling, Scaling::Block1x128);
  EXPECT_EQ(bw.b.scaling, Scaling::Block1x128);
  EXPECT_FALSE(bw.fast_accum);
  Recipe n = make_recipe(Precision::NVFP4, wgrad, o);
  EXPECT_TRUE(n.a.hadamard);
  EXPECT_TRUE(n.a.stochastic_rounding);  // dY^T, the gradient, is Wgrad's left operand
  EXPECT_FALSE(n.b.stochastic_rounding);
  EXPECT_EQ(make_recipe(Precision::NVFP4, fprop, o).b.scaling, Scaling::Nv16x16);
  EXPECT_FALSE(make_recipe(Precision::NVFP4, fprop, o).a.hadamard);
}

TEST(Recipes, Sm100PathsAndConstraints) {
  Plan p = build_model_plan(default_config());
  RecipeOptions o;
  o.fp8_block_via_mxfp8 = true;  // what the engine sets on compute capability >= 10.0
  for (const Gemm& g : p.gemms) {
    Recipe r = make_recipe(Precision::FP8Block, g, o);
    EXPECT_EQ(r.a.scaling, Scaling::Mx32);
    EXPECT_EQ(r.b.scaling, Scaling::Mx32);
    EXPECT_EQ(r.a.format, ElemFormat::E4M3);  // TE's Float8BlockScaling default: E4M3 everywhere
    EXPECT_EQ(make_recipe(Precision::FP8Block, g, [&] { RecipeOptions h = o; h.block_fp8_format = Fp8Format::Hybrid; return h; }()).a.format,
              g.a.role == Role::Grad ? ElemFormat::E5M2 : ElemFormat::E4M3);
  }
  // Alignment rules of the block-scaled sm_100 GEMMs.
  Plan s = build_shapes_plan("4096x4112x4096,4096x4096x4096,4096x4096x4112,4128x4096x4096");
  RecipeOptions d;
  EXPECT_NE(shape_constraint(make_recipe(Precision::MXFP8, s.gemms[0], d), s.gemms[0]).find("K a multiple of 32"), std::string::npos);
  EXPECT_EQ(shape_constraint(make_recipe(Precision::MXFP8, s.gemms[1], d), s.gemms[1]), "");
  EXPECT_NE(shape_constraint(make_recipe(Precision::NVFP4, s.gemms[2], d), s.gemms[2]).find("multiples of 32"), std::string::npos);
  EXPECT_EQ(shape_constraint(make_recipe(Precision::NVFP4, s.gemms[3], d), s.gemms[3]), "");
  EXPECT_NE(shape_constraint(make_recipe(Precision::FP8Block, s.gemms[0], o), s.gemms[0]).find("multiple of 32"), std::string::npos);
  // Scale bytes follow the swizzled 128x4 tiles: MXFP8 [4096 x 4096] -> 4096 rows x 128 scale columns.
  EXPECT_DOUBLE_EQ(make_recipe(Precision::MXFP8, s.gemms[1], d).a.scale_bytes(4096, 4096), 4096.0 * 128);
  EXPECT_DOUBLE_EQ(make_recipe(Precision::NVFP4, s.gemms[1], d).a.scale_bytes(100, 4096), 128.0 * 256 + 4);
}

TEST(Recipes, ShapeConstraintsAndBytes) {
  Plan p = build_shapes_plan("100x4096x4096,4096x4096x4096");
  RecipeOptions o;
  EXPECT_NE(shape_constraint(make_recipe(Precision::FP8Current, p.gemms[0], o), p.gemms[0]).find("multiples of 16"),
            std::string::npos);
  EXPECT_EQ(shape_constraint(make_recipe(Precision::FP8Current, p.gemms[1], o), p.gemms[1]), "");
  EXPECT_EQ(shape_constraint(make_recipe(Precision::BF16, p.gemms[0], o), p.gemms[0]), "");
  const Gemm& g = p.gemms[1];
  const double e = 4096.0 * 4096.0;
  ByteCount bf = byte_count(make_recipe(Precision::BF16, g, o), g);
  EXPECT_DOUBLE_EQ(bf.gemm, 3 * e * 2);
  EXPECT_DOUBLE_EQ(bf.quantize, 0);
  ByteCount f8 = byte_count(make_recipe(Precision::FP8Current, g, o), g);
  EXPECT_DOUBLE_EQ(f8.gemm, 2 * e + 2 * 4 + e * 2);          // two FP8 operands + 2 scales + BF16 out
  EXPECT_DOUBLE_EQ(f8.quantize, 2 * (e * 2 + e * 2 + e + 4));  // amax read + cast read + write + scale
  ByteCount dl = byte_count(make_recipe(Precision::FP8Delayed, g, o), g);
  EXPECT_DOUBLE_EQ(dl.quantize, 2 * (e * 2 + e + 4));           // one fused pass
}

// The vocabulary is padded as Megatron-LM pads it (128 x TP, at any TP) under its layout rules
// (core/model/layout_rules.hpp; the default), so GPT-2's 50257 is 50304 at TP 1 and 50432 at TP 2;
// Hugging Face / PyTorch pads nothing unless --make-vocab-size-divisible-by is given.
TEST(Validate, VocabPaddedAsTheFrameworkPadsIt) {
  ModelConfig c = default_config();
  c.vocab_size = 50257;
  EXPECT_EQ(padded_vocab(c), 50304);  // Megatron-LM pads at TP 1 too
  c.tensor_parallel = 2;
  EXPECT_NO_THROW(validate(c));
  EXPECT_EQ(padded_vocab(c), 50432);  // next multiple of 256
  const LayerDims d = layer_dims(c);
  EXPECT_EQ(d.vocab, 25216);
  c.vocab_divisible_by = 64;
  EXPECT_EQ(padded_vocab(c), 50304);  // multiple of 128
  c.tensor_parallel = 1;
  EXPECT_EQ(padded_vocab(c), 50304);
  c.vocab_size = 128256;
  c.vocab_divisible_by = 0;
  c.tensor_parallel = 2;
  EXPECT_EQ(padded_vocab(c), 128256);  // already a multiple of 256
  c.tensor_parallel = 8;
  EXPECT_EQ(padded_vocab(c), 129024);  // the next multiple of 1024, as Megatron pads it
  c.layout = LayoutFramework::PyTorch;
  c.vocab_size = 50257;
  c.tensor_parallel = 1;
  EXPECT_EQ(padded_vocab(c), 50257);
  c.tensor_parallel = 2;
  EXPECT_EQ(padded_vocab(c), 50257);
  EXPECT_EQ(layer_dims(c).vocab, 25129);  // the larger share of an uneven split
  c.vocab_divisible_by = 64;
  EXPECT_EQ(padded_vocab(c), 50304);  // given explicitly, PyTorch's plan pads too
}

// GPT-2 names, n_inner null = 4 x n_embd, n_positions caps the default sequence, and the name
// tells the model apart (file stem, family, sizes).
TEST(HfConfig, Gpt2Names) {
  ModelConfig c = parse_hf_config(R"({"model_type":"gpt2","n_embd":1024,"n_head":16,"n_layer":24,"n_inner":null,
    "n_positions":1024,"vocab_size":50257,"activation_function":"gelu_new"})", "models/gpt2-medium.json");
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.intermediate_size, 4096);
  EXPECT_FALSE(c.gated_mlp);
  EXPECT_EQ(c.sequence_length, 1024);
  EXPECT_EQ(c.sequence_from, "config.json n_positions");
  EXPECT_EQ(c.name, "gpt2-medium [gpt2, hidden 1024, 24 layers]");
  EXPECT_EQ(c.source, "models/gpt2-medium.json");
  EXPECT_TRUE(c.notes.empty());
  c = parse_hf_config(R"({"n_embd":768,"n_head":12,"n_layer":12,"n_inner":2000})", "x.json");
  EXPECT_EQ(c.intermediate_size, 2000);
}

// A multimodal text_config that leaves out heads takes the class defaults, each noted.
TEST(HfConfig, FamilyDefaultsForMissingFields) {
  ModelConfig c = parse_hf_config(R"({"model_type":"gemma3","text_config":{"hidden_size":2560,
    "intermediate_size":10240,"model_type":"gemma3_text","num_hidden_layers":34}})", "gemma-3-4b-it/config.json");
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.kv_heads(), 4);
  EXPECT_EQ(c.head_dimension(), 256);
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_TRUE(c.gated_mlp);
  ASSERT_EQ(c.notes.size(), 4u);
  EXPECT_EQ(c.notes[0], "gemma-3-4b-it/config.json has no 'num_attention_heads': Gemma3TextConfig's default 8 used");
  EXPECT_EQ(c.name, "gemma-3-4b-it [gemma3_text, hidden 2560, 34 layers]");
  // The wrapper alone names the family when text_config does not.
  c = parse_hf_config(R"({"model_type":"gemma3","text_config":{"hidden_size":2560,"intermediate_size":10240,
    "num_hidden_layers":34}})", "x.json");
  EXPECT_EQ(c.num_attention_heads, 8);
  // An unknown family still needs the required fields (from the file or a flag) before planning.
  EXPECT_THROW(build_model_plan(parse_hf_config(
                   R"({"model_type":"nova","hidden_size":64,"intermediate_size":256,"num_hidden_layers":2})", "x.json")),
               UsageError);
}

TEST(HfConfig, MissingVocabIsANoteAndNameFromNameOrPath) {
  ModelConfig c = parse_hf_config(R"({"_name_or_path":"org/Model-7B","hidden_size":4096,"intermediate_size":11008,
    "num_attention_heads":32,"num_hidden_layers":32})", "config.json");
  EXPECT_EQ(c.vocab_size, 0);
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("no 'vocab_size': no LM head GEMMs"), std::string::npos) << c.notes[0];
  EXPECT_EQ(c.name, "org/Model-7B [hidden 4096, 32 layers]");
  // Two models with the same family still get different names (directory, sizes).
  const ModelConfig a = parse_hf_config(R"({"model_type":"llama","hidden_size":4096,"intermediate_size":14336,
    "num_attention_heads":32,"num_hidden_layers":32,"vocab_size":128256})", "Llama-3.1-8B/config.json");
  const ModelConfig b = parse_hf_config(R"({"model_type":"llama","hidden_size":8192,"intermediate_size":28672,
    "num_attention_heads":64,"num_hidden_layers":80,"vocab_size":128256})", "Llama-3.1-70B/config.json");
  EXPECT_NE(a.name, b.name);
  EXPECT_EQ(a.name, "Llama-3.1-8B [llama, hidden 4096, 32 layers]");
}

TEST(HfConfig, UnreadableFileSaysWhy) {
  try {
    load_hf_config("/nonexistent/config.json");
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos) << e.what();
  }
  if (::geteuid() != 0) {  // root reads anything
    const std::string p = ::testing::TempDir() + "gs_unreadable_config.json";
    { std::ofstream(p) << "{}"; }
    ::chmod(p.c_str(), 0);
    try {
      load_hf_config(p);
      ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("permission denied"), std::string::npos) << e.what();
    }
    ::unlink(p.c_str());
  }
}

TEST(Presets, NamesAreCaseInsensitive) {
  EXPECT_EQ(find_preset("Llama-3-8B").name, "llama-3-8b");
  EXPECT_EQ(find_preset("CODONFM-5B").config.micro_batch_from, "preset codonfm-5b");
  EXPECT_THROW(find_preset("llama-3-9b"), UsageError);
}

// Every family's class defaults, as the transformers configuration classes publish them
// (src/transformers/models/<family>/configuration_<family>.py: LlamaConfig, MistralConfig,
// Qwen2Config, Qwen3Config, GemmaConfig, Gemma2Config, Gemma3TextConfig, Phi3Config, GPT2Config),
// written out here independently of kFamilies: a config.json that names only its model_type
// gets all of them, each with a visible note.
TEST(HfConfig, EveryFamilyTakesTheClassDefaults) {
  struct Want {
    const char* type;
    const char* cls;
    int64_t hidden, intermediate, heads, kv_heads, head_dim, layers, vocab, max_pos;
  };
  // kv_heads / head_dim: what the class derives when its default is None (heads; hidden / heads).
  const Want want[] = {
      {"llama", "LlamaConfig", 4096, 11008, 32, 32, 128, 32, 32000, 2048},
      {"mistral", "MistralConfig", 4096, 14336, 32, 8, 128, 32, 32000, 131072},
      {"qwen2", "Qwen2Config", 4096, 22016, 32, 32, 128, 32, 151936, 32768},
      {"qwen3", "Qwen3Config", 4096, 22016, 32, 32, 128, 32, 151936, 32768},
      {"gemma", "GemmaConfig", 3072, 24576, 16, 16, 256, 28, 256000, 8192},
      {"gemma2", "Gemma2Config", 2304, 9216, 8, 4, 256, 26, 256000, 8192},
      {"gemma3_text", "Gemma3TextConfig", 2304, 9216, 8, 4, 256, 26, 262208, 131072},
      {"phi3", "Phi3Config", 3072, 8192, 32, 32, 96, 32, 32064, 4096},
      {"gpt2", "GPT2Config", 768, 3072, 12, 12, 64, 12, 50257, 1024},
      // Families with experts (their MoE and MLA defaults: tests/core/model/test_moe_families.cpp).
      {"mixtral", "MixtralConfig", 4096, 14336, 32, 8, 128, 32, 32000, 131072},
      {"qwen2_moe", "Qwen2MoeConfig", 2048, 5632, 16, 16, 128, 24, 151936, 32768},
      {"qwen3_moe", "Qwen3MoeConfig", 2048, 6144, 32, 4, 64, 24, 151936, 32768},
      {"deepseek_v3", "DeepseekV3Config", 7168, 18432, 128, 128, 56, 61, 129280, 4096},
      {"olmoe", "OlmoeConfig", 2048, 2048, 16, 16, 128, 16, 50304, 4096},
      {"gpt_oss", "GptOssConfig", 2880, 2880, 64, 8, 64, 36, 201088, 131072},
  };
  for (const Want& w : want) {
    SCOPED_TRACE(w.type);
    const ModelConfig c = parse_hf_config(std::string(R"({"model_type":")") + w.type + "\"}", "m/config.json");
    EXPECT_EQ(c.hidden_size, w.hidden);
    EXPECT_EQ(c.intermediate_size, w.intermediate);
    EXPECT_EQ(c.num_attention_heads, w.heads);
    EXPECT_EQ(c.kv_heads(), w.kv_heads);
    EXPECT_EQ(c.head_dimension(), w.head_dim);
    EXPECT_EQ(c.num_hidden_layers, w.layers);
    EXPECT_EQ(c.vocab_size, w.vocab);
    // the default sequence (4096) capped by the class's maximum positions where that is smaller
    EXPECT_EQ(c.sequence_length, std::min<int64_t>(4096, w.max_pos));
    // every filled-in field is a note naming the class and the value
    EXPECT_FALSE(c.notes.empty());
    for (const std::string& n : c.notes)
      if (n.starts_with("m/config.json has no"))  // (Qwen2-MoE's note on its shared expert's gate is no default)
        EXPECT_NE(n.find(std::string(w.cls) + "'s default"), std::string::npos) << n;
    const std::string hidden_note = fmt::format("m/config.json has no 'hidden_size': {}'s default {} used", w.cls, w.hidden);
    EXPECT_NE(std::find(c.notes.begin(), c.notes.end(), hidden_note), c.notes.end()) << hidden_note;
  }
  // A file that gives its maximum positions keeps them; one without gets the class's, noted.
  ModelConfig c = parse_hf_config(R"({"model_type":"llama","hidden_size":64,"intermediate_size":128,
    "num_attention_heads":4,"num_hidden_layers":2,"vocab_size":100,"max_position_embeddings":8192})", "x.json");
  EXPECT_EQ(c.sequence_length, 4096);
  EXPECT_TRUE(c.notes.empty());
  c = parse_hf_config(R"({"model_type":"llama","hidden_size":64,"intermediate_size":128,
    "num_attention_heads":4,"num_hidden_layers":2,"vocab_size":100})", "x.json");
  EXPECT_EQ(c.sequence_length, 2048);
  EXPECT_EQ(c.sequence_from, "LlamaConfig default max_position_embeddings");
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_EQ(c.notes[0], "x.json has no 'max_position_embeddings': LlamaConfig's default 2048 used");
}
