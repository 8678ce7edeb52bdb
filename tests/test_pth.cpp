// PyTorch checkpoints (issue 18): torch.save files made by tools/make_pth_fixtures.py from the layout fixtures
// give exactly the tensors and maps of the safetensors files they came from; wrapped checkpoints, --key,
// strided views, shared storages; and hand-made hostile pickles, each refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/inspect/inspect.hpp"
#include "checkpoint/pickle.hpp"
#include "checkpoint/weights.hpp"
#include "checkpoint/weights_pth.hpp"
#include "checkpoint/weights_safetensors.hpp"
#include "core/error.hpp"
#include "model/vit.hpp"
#include "io/image_io.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace attnmap;

namespace {

const char* kLayouts[] = {"timm",    "hf",        "torchvision",      "hf_model",     "deit_distilled",
                          "qv_bias", "dinov2_fb", "timm_reg_noembed", "timm_reg_full"};
const char* kDtypes[] = {"", ".f16", ".bf16"};

std::string layout_dir(const std::string& name) { return fixture("layouts/" + name) + "/"; }
std::string misc(const std::string& f) { return fixture("pth_misc/" + f); }
std::string hostile(const std::string& f) { return fixture("pth_hostile/" + f); }

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

// Same names, shapes and bit-identical values.
void expect_same_tensors(const RawWeights& got, const RawWeights& want, const std::string& what) {
  ASSERT_EQ(got.tensors.size(), want.tensors.size()) << what;
  for (const auto& kv : want.tensors) {
    auto it = got.tensors.find(kv.first);
    ASSERT_NE(it, got.tensors.end()) << what << ": missing " << kv.first;
    EXPECT_EQ(it->second.shape, kv.second.shape) << what << ": " << kv.first;
    ASSERT_EQ(it->second.data.size(), kv.second.data.size()) << what << ": " << kv.first;
    EXPECT_EQ(std::memcmp(it->second.data.data(), kv.second.data.data(), kv.second.data.size() * 4), 0)
        << what << ": values of " << kv.first;
  }
}

std::vector<float> attention(const ViTWeights& w) {
  std::vector<int64_t> shape;
  std::vector<float> input(static_cast<size_t>(3 * w.hp.image_h * w.hp.image_w));
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8.0f;
  ForwardOptions fo;
  fo.keep_full = true;
  fo.to_end = true;
  return vit_forward(w, input.data(), fo).attn;
}

std::string load_error(const std::string& path, const std::string& key = "") {
  ModelOverrides ov;
  if (!key.empty()) ov.key = key;
  try {
    load_model(path, ov);
  } catch (const Error& e) {
    const std::string s = e.what();
    EXPECT_EQ(s.find('\n'), std::string::npos) << "one line: " << s;
    EXPECT_NE(s.find(path), std::string::npos) << "names the file: " << s;
    return s;
  }
  return "accepted";
}

const Tensor& tensor(const RawWeights& raw, const std::string& name) {
  auto it = raw.tensors.find(name);
  if (it == raw.tensors.end()) throw Error("test: no tensor " + name);
  return it->second;
}

}  // namespace

// ---- the layout fixtures as torch.save files ---------------------------------------------------------------

using PthCase = std::tuple<const char*, const char*>;
class PthLayouts : public ::testing::TestWithParam<PthCase> {};

TEST_P(PthLayouts, SameTensorsAndAttentionAsTheSafetensorsFile) {
  const std::string dir = layout_dir(std::get<0>(GetParam()));
  const std::string sfx = std::get<1>(GetParam());
  PthInfo info;
  const RawWeights pth = load_weights_pth(dir + "weights" + sfx + ".pth", "", &info);
  const RawWeights st = load_weights_safetensors(dir + "weights" + sfx + ".safetensors");
  expect_same_tensors(pth, st, dir + "weights" + sfx + ".pth");
  EXPECT_EQ(info.used, "the top level");
  EXPECT_EQ(info.holds.rfind("OrderedDict of " + std::to_string(st.tensors.size()) + " tensors", 0), 0u) << info.holds;

  const ViTWeights a = load_model(dir + "weights" + sfx + ".pth");
  const ViTWeights b = load_model(dir + "weights" + sfx + ".safetensors");
  EXPECT_EQ(a.format, "pth");
  EXPECT_EQ(a.hp.layout, b.hp.layout);
  EXPECT_EQ(a.hp.num_heads, b.hp.num_heads);
  EXPECT_EQ(a.hp.tokens(), b.hp.tokens());
  EXPECT_EQ(a.param_count, b.param_count);
  EXPECT_EQ(attention(a), attention(b));  // bit for bit: the same float32 values in the same order
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PthLayouts, ::testing::Combine(::testing::ValuesIn(kLayouts), ::testing::ValuesIn(kDtypes)),
                         [](const ::testing::TestParamInfo<PthCase>& p) {
                           const std::string d = std::get<1>(p.param);
                           return std::string(std::get<0>(p.param)) + (d.empty() ? "_f32" : "_" + d.substr(1));
                         });

TEST(Pth, WrappedTrainingCheckpointsFindTheirStateDict) {
  for (const char* name : kLayouts) {
    const std::string dir = layout_dir(name);
    const nlohmann::json meta = read_json(dir + "weights.wrapped.json");
    const std::string key = meta["key"].get<std::string>();
    PthInfo info;
    const RawWeights pth = load_weights_pth(dir + "weights.wrapped.pth", "", &info);
    expect_same_tensors(pth, load_weights_safetensors(dir + meta["source"].get<std::string>()), name);
    EXPECT_EQ(info.used, "'" + key + "'") << name;
    EXPECT_NE(info.holds.find("'epoch' (int 3)"), std::string::npos) << info.holds;
    EXPECT_NE(info.holds.find("'optimizer' (dict of 2 entries)"), std::string::npos) << info.holds;
    // --key naming the same entry gives the same; the inspect report says which entry was used.
    ModelOverrides ov;
    ov.key = key;
    const ViTWeights w = load_model(dir + "weights.wrapped.pth", ov);
    EXPECT_EQ(attention(w), attention(load_model(dir + meta["source"].get<std::string>())));
    const std::string report = describe_model(w, "x.pth");
    EXPECT_NE(report.find("format:      pth (torch.save zip archive)"), std::string::npos) << report;
    EXPECT_NE(report.find("state dict:  '" + key + "'"), std::string::npos) << report;
    EXPECT_NE(report.find("holds:       dict of 5 entries: '" + key + "' (OrderedDict of"), std::string::npos) << report;
  }
}

TEST(Pth, RenderGivesTheSameMapAsTheSafetensorsFile) {
  const fs::path out = fs::temp_directory_path() / ("attnmap_pth_render_" + std::to_string(::getpid()));
  for (const char* name : {"timm", "dinov2_fb", "torchvision"}) {
    std::vector<std::string> npys, pngs;
    for (const std::string file : {"weights.bf16.safetensors", "weights.bf16.pth", "weights.wrapped.pth"}) {
      if (file == "weights.wrapped.pth" && read_json(layout_dir(name) + "weights.wrapped.json")["source"] != "weights.bf16.safetensors")
        continue;
      fs::remove_all(out);
      const CliRun r = run_attnmap("render '" + std::string(ATTNMAP_TEST_DIR) + "/images/basic/rgba.png' -q --save-raw -w '" +
                                   layout_dir(name) + file + "' -o " + q(out));
      ASSERT_EQ(r.status, 0) << name << "/" << file << ": " << r.err;
      npys.push_back(slurp(out / "rgba.npy"));
      // Pixels: the files' settings records differ by the weights file's name and hash.
      const attnmap::Image overlay = attnmap::load_image((out / "rgba.png").string());
      pngs.push_back(std::string(overlay.rgb.begin(), overlay.rgb.end()));
      EXPECT_FALSE(npys.back().empty());
      EXPECT_FALSE(pngs.back().empty());
      if (npys.size() > 1) {
        EXPECT_EQ(npys.back(), npys.front()) << name << "/" << file << ": map differs from the safetensors file's";
        EXPECT_EQ(pngs.back(), pngs.front()) << name << "/" << file << ": overlay differs from the safetensors file's";
      }
    }
    EXPECT_GE(npys.size(), 2u);
  }
  fs::remove_all(out);
}

TEST(Pth, InspectListsTheTopLevelKeysAndTheEntryUsed) {
  const CliRun r = run_attnmap("inspect '" + misc("teacher_student.pth") + "'");
  EXPECT_EQ(r.status, 2) << r.out;  // no ViT layout in the tiny teacher; the --key path is what is checked below
  const CliRun k = run_attnmap("inspect '" + layout_dir("hf") + "weights.wrapped.pth' --key state_dict");
  EXPECT_EQ(k.status, 0) << k.err;
  EXPECT_NE(k.out.find("state dict:  'state_dict'"), std::string::npos) << k.out;
  EXPECT_NE(k.out.find("'best_acc' (float), 'arch' (str)"), std::string::npos) << k.out;
  const CliRun bad = run_attnmap("inspect '" + layout_dir("hf") + "weights.wrapped.pth' --key optimizer");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("no state dict (a dict of tensors) found under 'optimizer'"), std::string::npos) << bad.err;
  const CliRun none = run_attnmap("render x.png --key '' -w '" + layout_dir("hf") + "weights.wrapped.pth'");
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("--key expects a value, found ''"), std::string::npos) << none.err;
}

// ---- what the reader does with the tensors ---------------------------------------------------------------

TEST(Pth, StridedViewsSharedStoragesAndDtypesAreCopiedOutExactly) {
  const nlohmann::json want = read_json(misc("views.json"));
  for (const char* file : {"views.pth", "views_deflated.pth"}) {  // in place from the mmap, and read (deflated)
    const RawWeights raw = load_weights_pth(misc(file), "");
    for (auto it = want.begin(); it != want.end(); ++it) {
      const Tensor& t = tensor(raw, it.key());
      EXPECT_EQ(t.shape, it.value()[1].get<std::vector<int64_t>>()) << it.key();
      EXPECT_EQ(t.data, it.value()[0].get<std::vector<float>>()) << file << ": " << it.key();
    }
    EXPECT_EQ(raw.tensors.size(), want.size());
    EXPECT_EQ(raw.skipped.at("position_ids"), "I64");
    EXPECT_EQ(raw.skipped.at("mask"), "BOOL");
  }
  // Spot values, independent of the JSON: transposed (6, 4) of arange(24)/8, and k = rows 2..3 of qkv.
  const RawWeights raw = load_weights_pth(misc("views.pth"), "");
  EXPECT_EQ(tensor(raw, "transposed").data[1], 6.0f / 8);
  EXPECT_EQ(tensor(raw, "every_other").data[1], 2.0f / 8);
  EXPECT_EQ(tensor(raw, "k").data[0], 12.0f - 10);
  EXPECT_EQ(tensor(raw, "param").data, (std::vector<float>{7, 8}));
}

TEST(Pth, ModuleStateDictWithMetadataAndIntegerBuffers) {
  const RawWeights raw = load_weights_pth(misc("module_state_dict.pth"), "");
  const nlohmann::json want = read_json(misc("module_state_dict.json"));
  for (auto it = want.begin(); it != want.end(); ++it) EXPECT_EQ(tensor(raw, it.key()).data, it.value().get<std::vector<float>>()) << it.key();
  EXPECT_EQ(raw.skipped.at("2.num_batches_tracked"), "I64");
}

TEST(Pth, WrapperKeysKeyOptionAndItsErrors) {
  PthInfo info;
  RawWeights raw = load_weights_pth(misc("teacher_student.pth"), "", &info);
  EXPECT_EQ(info.used, "'teacher'");  // DINO evaluates the teacher
  EXPECT_EQ(tensor(raw, "backbone.w").data, (std::vector<float>{1, 2}));
  ASSERT_FALSE(raw.notices.empty());
  EXPECT_NE(raw.notices[0].find("also has 'student' (choose with {setting:key})"), std::string::npos) << raw.notices[0];
  raw = load_weights_pth(misc("timm_ema.pth"), "", &info);  // timm train.py: state_dict used, the EMA named
  EXPECT_EQ(info.used, "'state_dict'");
  ASSERT_FALSE(raw.notices.empty());
  EXPECT_NE(raw.notices[0].find("also has 'state_dict_ema' (choose with {setting:key})"), std::string::npos) << raw.notices[0];
  raw = load_weights_pth(misc("timm_ema.pth"), "state_dict_ema", &info);
  EXPECT_EQ(tensor(raw, "backbone.w").data, (std::vector<float>{-1, -2}));
  raw = load_weights_pth(misc("teacher_student.pth"), "student", &info);
  EXPECT_EQ(tensor(raw, "backbone.w").data, (std::vector<float>{-1, -2}));
  raw = load_weights_pth(misc("nested.pth"), "checkpoint/ema", &info);
  EXPECT_EQ(info.used, "'checkpoint/ema/state_dict'");
  EXPECT_EQ(tensor(raw, "head.w").data, (std::vector<float>{3}));
  raw = load_weights_pth(misc("two_unnamed.pth"), "b", &info);
  EXPECT_EQ(tensor(raw, "head.w").data, (std::vector<float>{-3}));

  EXPECT_NE(load_error(misc("nested.pth")).find("no state dict (a dict of tensors) found; it holds: 'checkpoint' (dict of 1 entry), 'epoch' (int 1)"), std::string::npos);
  EXPECT_NE(load_error(misc("two_unnamed.pth")).find("several state dicts: 'a', 'b'; choose one with {setting:key}"), std::string::npos);
  EXPECT_NE(load_error(misc("no_state_dict.pth")).find("it holds: 'epoch' (int 3), 'lr' (float)"), std::string::npos);
  EXPECT_NE(load_error(misc("teacher_student.pth"), "techer").find("{setting:key} 'techer': no entry 'techer'; the entries are: 'student' (OrderedDict of 2 tensors), 'teacher'"), std::string::npos);
  EXPECT_NE(load_error(misc("teacher_student.pth"), "teacher/backbone.w").find("names a tensor, not a state dict"), std::string::npos);
  EXPECT_NE(load_error(layout_dir("timm") + "weights.safetensors", "model").find("{setting:key} picks an entry of a PyTorch checkpoint"), std::string::npos);
}

TEST(Pth, LegacyTorchScriptAndTrainingArgsAreRefusedWithWhatToDo) {
  EXPECT_NE(load_error(misc("legacy.pth")).find("legacy format (a bare pickle: torch < 1.6, or _use_new_zipfile_serialization=False)"), std::string::npos);
  EXPECT_NE(load_error(misc("legacy.pth")).find("re-save it on torch >= 1.6"), std::string::npos);
  EXPECT_NE(load_error(misc("torchscript.pt")).find("a TorchScript archive (torch.jit.save), not a state dict: save the weights with torch.save(model.state_dict(), PATH)"), std::string::npos);
  // A training checkpoint's argparse.Namespace is read as inert data (issue 24): the load goes on to the
  // state dict ('teacher', here a toy that is no ViT).
  const std::string e = load_error(misc("dino_with_args.pth"));
  EXPECT_EQ(e.find("argparse.Namespace"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown weights layout"), std::string::npos) << e;
}

// ---- hostile files ---------------------------------------------------------------------------------------

TEST(PthHostile, EachIsRefusedByName) {
  struct Case {
    const char* file;
    const char* message;
  };
  const Case cases[] = {
      {"os_system.pth", "refused: the pickle in PATH calls os.system, which is not a tensor or a container (attnmap reads state dicts only, like torch.load(weights_only=True))"},
      {"builtins_eval.pth", "calls builtins.eval, which is not a tensor"},
      {"unknown_class.pth", "calls __main__.Evil, which is not a tensor"},
      {"reduce_storage_type.pth", "data.pkl: REDUCE on torch.FloatStorage, which is a storage type, not a function"},
      {"build_on_tensor.pth", "data.pkl: BUILD on a tensor (2, 3) F32 at byte"},
      {"tensor_past_storage.pth", "data.pkl: a tensor of size (2, 3), stride (3, 1) at offset 4 runs past its storage '0' of 6 elements"},
      {"stride_overflow.pth", "stride (4611686018427387904, 1) at offset 0 runs past its storage '0' of 6 elements"},
      {"missing_storage.pth", "the pickle names storage '7', but the archive has no entry 'archive/data/7'"},
      {"storage_size_mismatch.pth", "storage '0' (F32) declares 600 elements, but its entry 'archive/data/0' holds 24 bytes"},
      {"truncated.pth", "data.pkl: the pickle ends inside"},
      {"deep_nesting.pth", "data.pkl: nesting deeper than 100000 MARKs"},
      {"huge_memo.pth", "data.pkl: memo index 4294967294 used at byte 9 was never stored"},
  };
  for (const Case& c : cases) {
    const std::string path = hostile(c.file);
    std::string want = c.message;
    if (want.find("PATH") != std::string::npos) want.replace(want.find("PATH"), 4, path);
    const std::string e = load_error(path);
    EXPECT_NE(e.find(want), std::string::npos) << c.file << ": " << e;
  }
  // The control, from the same writer, is read: w = 0..5 as (2, 3).
  const RawWeights ok = load_weights_pth(hostile("control_ok.pth"), "");
  EXPECT_EQ(tensor(ok, "w").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(tensor(ok, "w").data, (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

namespace {

std::string unpickle_error(const std::string& bytes) {
  try {
    unpickle(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "p.pkl");
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST(PthHostile, UnpicklerRefusesMalformedStreams) {
  const std::string P = "\x80\x02";
  EXPECT_NE(unpickle_error(P + "0.").find("stack underflow"), std::string::npos);
  EXPECT_NE(unpickle_error(P + "2.").find("stack underflow"), std::string::npos);
  EXPECT_NE(unpickle_error(P + "}(K\x01u.").find("odd number"), std::string::npos);
  EXPECT_NE(unpickle_error(P + "\x8a\x09" + std::string(9, '\x01') + ".").find("more than 64 bits"), std::string::npos);
  EXPECT_NE(unpickle_error("\x80\x06N.").find("pickle protocol 6"), std::string::npos);
  EXPECT_NE(unpickle_error(P + "N.N").find("1 bytes after the pickle's STOP"), std::string::npos);
  EXPECT_NE(unpickle_error(P + "NN.").find("2 values on its stack"), std::string::npos);
  EXPECT_NE(unpickle_error(P + "ios\nsystem\n.").find("unsupported pickle opcode 0x69"), std::string::npos);  // INST
  EXPECT_NE(unpickle_error(P + "X\xff\xff\xff\x7f").find("runs past the end"), std::string::npos);
  EXPECT_NE(unpickle_error(P + "K\x01)R.").find("REDUCE on a int 1, not a callable"), std::string::npos);
  EXPECT_NE(unpickle_error(P + "Vos\n.").find("unsupported pickle opcode"), std::string::npos);
  EXPECT_NE(unpickle_error(P + "\x8c\x02os\x8c\x06system\x93.").find("calls os.system"), std::string::npos);  // STACK_GLOBAL
  EXPECT_NE(unpickle_error(P + "ccollections\nOrderedDict\nK\x01\x85R.").find("called with arguments"), std::string::npos);
  // A list appended to itself (a cycle) and a 50 000-deep tuple are plain data: read without recursion.
  EXPECT_EQ(unpickle_error(P + std::string("]q\0h\0a.", 7)), "accepted");
  EXPECT_EQ(unpickle_error(P + std::string(50000, '(') + std::string(50000, 't') + "."), "accepted");
  const std::string cyc = P + std::string("}q\0X\1\0\0\0ah\0s.", 13);  // {'a': itself}: no state dict, no hang
  const PickleData p = unpickle(reinterpret_cast<const uint8_t*>(cyc.data()), cyc.size(), "p.pkl");
  EXPECT_EQ(describe_value(p, p.values[p.root]), "dict of 1 entry");
}

TEST(Pth, TrainingPrefixesGoThroughTheLayoutDetection) {
  // DDP's module. under 'state_dict', and a DINO checkpoint: teacher (used) and student, backbone. names
  // beside a DINOHead; both give the maps of the F16 timm fixture they were made from.
  const std::string dir = layout_dir("timm");
  const std::vector<float> want = attention(load_model(dir + "weights.f16.safetensors"));
  const ViTWeights ddp = load_model(dir + "weights.ddp.pth");
  EXPECT_EQ(layout_name(ddp.hp.layout), "timm");
  EXPECT_EQ(ddp.pth_used, "'state_dict'");
  EXPECT_EQ(attention(ddp), want);
  const ViTWeights dino = load_model(dir + "weights.dino.pth");
  EXPECT_EQ(dino.pth_used, "'teacher'");
  EXPECT_FALSE(dino.head.present());  // DINOHead is not a classifier
  EXPECT_EQ(attention(dino), want);
  std::string notes;
  for (const auto& n : dino.notices) notes += n + "\n";
  EXPECT_NE(notes.find("also has 'student' (choose with {setting:key})"), std::string::npos) << notes;
  ModelOverrides ov;
  ov.key = "student";  // the negated weights: a different model
  EXPECT_NE(attention(load_model(dir + "weights.dino.pth", ov)), want);
}
