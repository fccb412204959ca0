#include "sim/frameworks/megatron_import.hpp"

#include <charconv>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "sim/config/json_reader.hpp"

namespace rm::frameworks {

std::vector<std::string> split_arguments(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote) {
      if (c == quote) quote = 0;
      else word += c;
      continue;
    }
    if (c == '\\' && i + 1 < text.size() && text[i + 1] == '\n') { ++i; continue; }
    if (c == '#' && !in_word) {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (c == '\'' || c == '"') { quote = c; in_word = true; continue; }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) words.push_back(word), word.clear(), in_word = false;
      continue;
    }
    word += c;
    in_word = true;
  }
  if (quote) throw ConfigError("Megatron arguments: a quote is not closed");
  if (in_word) words.push_back(word);
  return words;
}

namespace {

// The flags read, each with the values that followed it.
using Flags = std::map<std::string, std::vector<std::string>>;

// Flags that take no value.
const std::set<std::string> kSwitches = {"--sequence-parallel", "--use-distributed-optimizer", "--group-query-attention",
                                         "--swiglu", "--untie-embeddings-and-output-weights", "--bf16"};
// Flags read into the experiment (besides the switches).
const std::set<std::string> kValued = {
    "--num-layers",          "--hidden-size",          "--ffn-hidden-size",        "--num-attention-heads",
    "--num-query-groups",    "--kv-channels",          "--vocab-size",             "--seq-length",
    "--max-position-embeddings", "--micro-batch-size", "--global-batch-size",      "--tensor-model-parallel-size",
    "--context-parallel-size", "--cp-comm-type",       "--hierarchical-context-parallel-sizes",
    "--pipeline-model-parallel-size", "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
    "--normalization",       "--position-embedding-type"};

struct Parsed {
  Flags flags;
  std::vector<std::string> ignored;
};

Parsed parse_flags(const std::vector<std::string>& words) {
  Parsed out;
  for (size_t i = 0; i < words.size();) {
    std::string flag = words[i];
    std::vector<std::string> values;
    if (flag.rfind("--", 0) != 0) {
      out.ignored.push_back(fmt::format("{} (not a --flag)", flag));
      ++i;
      continue;
    }
    if (const size_t eq = flag.find('='); eq != std::string::npos) {
      values.push_back(flag.substr(eq + 1));
      flag = flag.substr(0, eq);
    }
    for (++i; i < words.size() && words[i].rfind("--", 0) != 0; ++i) values.push_back(words[i]);
    const bool known = kSwitches.count(flag) > 0 || kValued.count(flag) > 0;
    if (!known) {
      out.ignored.push_back(values.empty() ? fmt::format("{} (not modelled)", flag)
                                           : fmt::format("{} {} (not modelled)", flag, fmt::join(values, " ")));
      continue;
    }
    if (kSwitches.count(flag) && !values.empty())
      throw ConfigError(fmt::format("Megatron arguments: {}: takes no value, got \"{}\"", flag, values.front()));
    if (kValued.count(flag) && values.empty())
      throw ConfigError(fmt::format("Megatron arguments: {}: expected a value", flag));
    out.flags[flag] = values;
  }
  return out;
}

int64_t to_int(const std::string& flag, const std::string& text) {
  int64_t v = 0;
  const auto [at, err] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (err != std::errc() || at != text.data() + text.size() || v < 1 || v > (int64_t(1) << 40))
    throw ConfigError(fmt::format("Megatron arguments: {}: expected a positive integer, got \"{}\"", flag, text));
  return v;
}

}  // namespace

MegatronImport import_megatron(const std::string& args, int gpus, const ConfigStore& store) {
  Parsed parsed = parse_flags(split_arguments(args));
  const Flags& f = parsed.flags;
  MegatronImport out;
  out.ignored = std::move(parsed.ignored);
  auto has = [&](const std::string& flag) { return f.count(flag) > 0; };
  auto single = [&](const std::string& flag) -> const std::string& {
    const auto& v = f.at(flag);
    if (v.size() > 1)
      throw ConfigError(fmt::format("Megatron arguments: {}: expected one value, got \"{}\"", flag, fmt::join(v, " ")));
    return v.front();
  };
  auto integer = [&](const std::string& flag) { return to_int(flag, single(flag)); };
  auto integer_or = [&](const std::string& flag, int64_t fallback) { return has(flag) ? integer(flag) : fallback; };
  auto need = [&](const std::string& flag) {
    if (!has(flag)) throw ConfigError(fmt::format("Megatron arguments: expected {} (the model shape needs it)", flag));
    return integer(flag);
  };
  auto row = [&](const std::string& flag, const std::string& key, const auto& value) {
    const std::string arg = has(flag) ? (f.at(flag).empty() ? flag : fmt::format("{} {}", flag, fmt::join(f.at(flag), " ")))
                                      : flag + " (not given)";
    out.read.push_back({arg, key, fmt::format("{}", value)});
  };

  // The model shape.
  const int64_t layers = need("--num-layers"), hidden = need("--hidden-size"), heads = need("--num-attention-heads");
  // As Megatron reads them: query groups only with --group-query-attention (then 1 unless given).
  const bool gqa = has("--group-query-attention");
  const int64_t kv = gqa ? integer_or("--num-query-groups", 1) : heads;
  if (has("--num-query-groups") && !gqa)
    out.ignored.push_back(fmt::format("--num-query-groups {} (without --group-query-attention Megatron ignores it: "
                                      "{} KV heads)", single("--num-query-groups"), heads));
  const int64_t head_dim = integer_or("--kv-channels", hidden / heads);
  const bool swiglu = has("--swiglu");
  // Megatron's default MLP width: 4h, or 2/3 of it rounded down to a multiple of 64 with SwiGLU.
  const int64_t ffn = integer_or("--ffn-hidden-size", swiglu ? (8 * hidden / 3) / 64 * 64 : 4 * hidden);
  if (!swiglu) out.ignored.push_back("no --swiglu (ringmaster's model is a SwiGLU MLP: read as one)");
  if (has("--normalization") && single("--normalization") != "RMSNorm")
    out.ignored.push_back(fmt::format("--normalization {} (read as RMSNorm)", single("--normalization")));
  const bool tied = !has("--untie-embeddings-and-output-weights");
  nlohmann::json model = {{"layers", layers},   {"hidden", hidden}, {"heads", heads},      {"kv_heads", kv},
                          {"head_dim", head_dim}, {"intermediate", ffn}, {"tied_embeddings", tied}};
  std::optional<int64_t> vocab;
  if (has("--vocab-size")) vocab = integer("--vocab-size");
  out.model = nullptr;
  for (const std::string& name : store.names("models")) {
    const nlohmann::json shipped = store.load("models", name, "--from-megatron").json;
    bool same = true;
    for (auto it = model.begin(); it != model.end(); ++it)
      same = same && shipped.contains(it.key()) && shipped[it.key()] == *it;
    if (same && (!vocab || shipped.value("vocab", int64_t(0)) == *vocab)) {
      out.model = name;
      break;
    }
  }
  if (out.model.is_null()) {
    if (!vocab)
      throw ConfigError("Megatron arguments: expected --vocab-size (the model shape matches no shipped model, so it is "
                        "written inline and needs its vocabulary)");
    model["name"] = "megatron-import";
    model["vocab"] = *vocab;
    out.model = model;
  }
  out.read.push_back({"--num-layers --hidden-size --num-attention-heads ...", "model",
                      out.model.is_string() ? out.model.get<std::string>() + " (the shipped model of this shape)"
                                            : "inline (no shipped model has this shape)"});

  // The workload.
  const int64_t seq = need("--seq-length");
  const int64_t micro = integer_or("--micro-batch-size", 1);
  const int64_t global = integer_or("--global-batch-size", micro);
  out.workload = {{"seq_len", seq}, {"batch", micro}};
  row("--seq-length", "workload.seq_len", seq);
  row("--micro-batch-size", "workload.batch", micro);

  // The parallel block.
  if (integer_or("--pipeline-model-parallel-size", 1) > 1)
    out.ignored.push_back(fmt::format("--pipeline-model-parallel-size {} (pipeline parallelism is not modelled: read "
                                      "as 1)", single("--pipeline-model-parallel-size")));
  const int64_t tp = integer_or("--tensor-model-parallel-size", 1);
  if (tp > 1 && !has("--sequence-parallel"))
    out.ignored.push_back("no --sequence-parallel (ringmaster's tensor parallelism always has it: read with it)");
  const int64_t context = integer_or("--context-parallel-size", 1);
  std::string comm = "p2p";
  if (has("--cp-comm-type")) {
    const auto& types = f.at("--cp-comm-type");
    comm = types.front();
    for (const auto& t : types)
      if (t != comm) {
        out.ignored.push_back(fmt::format("--cp-comm-type {} (one type per layer is not modelled: read as {} for "
                                          "every layer)", fmt::join(types, " "), comm));
        break;
      }
  }
  int64_t hp = 1, cp = context;
  if (comm == "a2a") {
    hp = context, cp = 1;
  } else if (comm == "a2a+p2p") {
    if (!has("--hierarchical-context-parallel-sizes"))
      throw ConfigError("Megatron arguments: --cp-comm-type a2a+p2p: expected --hierarchical-context-parallel-sizes");
    const auto& sizes = f.at("--hierarchical-context-parallel-sizes");
    if (sizes.size() != 2)
      throw ConfigError(fmt::format("Megatron arguments: --hierarchical-context-parallel-sizes: expected two sizes "
                                    "(all-to-all, then ring), got \"{}\"", fmt::join(sizes, " ")));
    hp = to_int("--hierarchical-context-parallel-sizes", sizes[0]);
    cp = to_int("--hierarchical-context-parallel-sizes", sizes[1]);
    if (hp * cp != context)
      throw ConfigError(fmt::format("Megatron arguments: --hierarchical-context-parallel-sizes {} {}: expected a "
                                    "product equal to --context-parallel-size {}", hp, cp, context));
  } else if (comm == "allgather" || comm == "all_gather") {
    out.ignored.push_back(fmt::format("--cp-comm-type {} (all-gather context parallelism is not modelled: read as "
                                      "p2p)", comm));
  } else if (comm != "p2p") {
    throw ConfigError(fmt::format("Megatron arguments: --cp-comm-type: expected p2p, a2a, allgather or a2a+p2p, got "
                                  "\"{}\"", comm));
  }
  int64_t dp = 0;
  if (gpus > 0) {
    if (gpus % (tp * context) != 0)
      throw ConfigError(fmt::format("--gpus {}: expected a multiple of tensor x context parallel = {}", gpus,
                                    tp * context));
    dp = gpus / (tp * context);
  } else {
    if (global % micro != 0)
      throw ConfigError(fmt::format("Megatron arguments: --global-batch-size {}: expected a multiple of "
                                    "--micro-batch-size {}", global, micro));
    dp = global / micro;  // no gradient accumulation
  }
  if (gpus > 0 && has("--global-batch-size") && global != micro * dp)
    out.ignored.push_back(fmt::format("--global-batch-size {} (gradient accumulation is not modelled: one micro-batch "
                                      "per step)", global));
  std::string checkpoint = "none";
  if (has("--recompute-granularity")) {
    const std::string g = single("--recompute-granularity");
    if (g == "full") {
      checkpoint = "full";
      const bool every_layer = (!has("--recompute-method") || single("--recompute-method") == "uniform") &&
                               integer_or("--recompute-num-layers", 1) == 1;
      if (!every_layer)
        out.ignored.push_back("--recompute-method/--recompute-num-layers (recomputing part of the layers is not "
                              "modelled: read as every layer)");
    } else if (g == "selective") {
      out.ignored.push_back("--recompute-granularity selective (Megatron's recompute of core attention is not "
                            "modelled: read as checkpoint none)");
    } else {
      throw ConfigError(fmt::format("Megatron arguments: --recompute-granularity: expected full or selective, got "
                                    "\"{}\"", g));
    }
  }
  const int zero = has("--use-distributed-optimizer") ? 1 : 0;
  out.parallel = {{"dp", dp}, {"tp", tp}, {"hp", hp}, {"cp", cp}, {"ring", "ring"}, {"placement", "head_first"},
                  {"checkpoint", checkpoint}, {"zero_stage", zero}};
  if (context > 1) {  // its data loader's zigzag, over the whole context-parallel group
    out.parallel["partition"] = "zigzag";
    out.parallel["shuffle"] = "once";
  }
  if (gpus > 0)
    out.read.push_back({fmt::format("--gpus {} / (tp {} x context {})", gpus, tp, context), "parallel.dp",
                        std::to_string(dp)});
  else
    out.read.push_back({fmt::format("--global-batch-size {} / --micro-batch-size {}", global, micro), "parallel.dp",
                        std::to_string(dp)});
  row("--tensor-model-parallel-size", "parallel.tp", tp);
  row("--cp-comm-type", "parallel.hp", hp);
  row("--context-parallel-size", "parallel.cp", cp);
  if (context > 1)
    row("--context-parallel-size", "parallel.partition", "zigzag (2*CP chunks, made at data loading: shuffle once)");
  row("--recompute-granularity", "parallel.checkpoint", checkpoint);
  row("--use-distributed-optimizer", "parallel.zero_stage", zero);
  return out;
}

}  // namespace rm::frameworks
