// Tests for include/collc/wisdom.hpp: the file form round trips (with
// programs and names that need escaping), lookup by key / count range /
// fingerprint, merging, the atomic locked update under concurrent writers
// (threads and processes), and every way a file can be bad: truncated at
// every byte, any byte flipped, foreign version, foreign machine, checksum
// mismatch, entries that would yield a wrong plan behind a valid checksum,
// unreadable paths, stale locks. A bad file is ignored with a warning; it
// never throws and never yields an entry. Writers and clear never replace or
// remove what is not a wisdom file (a user's notes, a directory), follow
// symlinks, and report the real reason when they cannot write.
#include <catch2/catch.hpp>
#include <collc/algo/lower.hpp>
#include <collc/ir/text.hpp>
#include <collc/topology.hpp>
#include <collc/wisdom.hpp>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace collc;
namespace fs = std::filesystem;

namespace {

/// A fresh directory per test case, removed at the end.
struct scratch_dir {
  fs::path dir;
  scratch_dir() {
    std::random_device rd;
    dir = fs::temp_directory_path() / ("collc_wisdom_test_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    fs::create_directories(dir);
  }
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path operator/(const std::string& name) const { return dir / name; }
};

wisdom_key key_for(int ranks, std::string fp = "0011223344556677") {
  wisdom_key k;
  k.coll = collective::allreduce;
  k.elem_size = 8;
  k.op = "collc::plus";
  k.commutative = true;
  k.ranks = ranks;
  k.nodes = 1;
  k.ranks_per_node = ranks;
  k.fingerprint = std::move(fp);
  return k;
}

wisdom_entry entry_for(int ranks, std::size_t lo, std::size_t hi, std::string sched,
                       std::string fp = "0011223344556677") {
  wisdom_entry e;
  e.key = key_for(ranks, std::move(fp));
  e.min_count = lo;
  e.max_count = hi;
  e.schedule = std::move(sched);
  e.seconds = 0.5;
  e.source = "tuned";
  return e;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

/// A text with a valid checksum (so only the content checks can reject it).
std::string resealed(std::string text) {
  const auto at = text.rfind("checksum ");
  text.resize(at);
  return text + "checksum " + collc::detail::hex64(collc::detail::stable_hash64(text)) + "\n";
}

/// Loads `p` and requires it to be ignored with one warning containing `why`.
void ignored(const fs::path& p, const std::string& why, std::string_view fp = {}) {
  std::vector<std::string> warnings;
  wisdom w;
  REQUIRE_NOTHROW(w = wisdom::load(p, fp, &warnings));
  CHECK(w.empty());
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains(why) && Catch::Contains("ignored"));
}

wisdom sample() {
  wisdom w;
  w.insert(entry_for(8, 1, 63, "recexch{8}"));
  auto a = entry_for(2, 1, 63, "recexch{-2,2}");
  a.key.op = "my op<int, 3> (\"quoted\")\n%=";  // needs escaping
  w.insert(a);
  auto b = entry_for(8, 64, 4095, "recexch{-8,8}");
  {
    algo::lower_request q;
    q.ranks = 8;
    q.count = 64;
    b.program = ir::to_text(algo::lower(algo::schedule::recursive({-8, 8}), q));
  }
  w.insert(b);
  auto c = entry_for(7, 4096, 1 << 20, "cyclic{2,2,2}");
  c.seconds = 3e-4;
  c.source = "model";
  w.insert(c);
  auto d = entry_for(6, 1, 100, "recexch{2,2}+fold");
  d.key.coll = collective::allreduce;
  d.key.commutative = false;
  d.key.op = "mat_mul";
  w.insert(d);
  return w;
}

}  // namespace

TEST_CASE("round trip: text form and file", "[wisdom][roundtrip]") {
  const wisdom w = sample();
  REQUIRE(w.entries().size() == 5);
  const std::string text = w.to_text();
  CHECK(text.starts_with("collc-wisdom 1\n"));
  CHECK(text.find("collc-program 1") != std::string::npos);
  CHECK(wisdom::parse(text) == w);
  // Escaped values stay on one line.
  CHECK(text.find("my%20op") != std::string::npos);

  scratch_dir d;
  std::vector<std::string> warnings;
  wisdom::update(d / "w", w.entries(), &warnings);
  CHECK(warnings.empty());
  CHECK(wisdom::load(d / "w", "0011223344556677", &warnings) == w);
  CHECK(warnings.empty());
  // Nothing left behind: no temporary file, no lock.
  int files = 0;
  for (const auto& f : fs::directory_iterator(d.dir)) {
    ++files;
    CHECK(f.path().filename() == "w");
  }
  CHECK(files == 1);
  // A missing file is empty wisdom, silently.
  CHECK(wisdom::load(d / "none", "x", &warnings).empty());
  CHECK(warnings.empty());
}

TEST_CASE("find: key, count range, fingerprint", "[wisdom][find]") {
  const wisdom w = sample();
  CHECK(w.find(key_for(8), 1)->schedule == "recexch{8}");
  CHECK(w.find(key_for(8), 63)->schedule == "recexch{8}");
  CHECK(w.find(key_for(8), 64)->schedule == "recexch{-8,8}");
  CHECK(!w.find(key_for(8), 0));
  CHECK(!w.find(key_for(8), 4096));
  CHECK(!w.find(key_for(8, "another-machine"), 10));
  auto k = key_for(8);
  k.elem_size = 4;
  CHECK(!w.find(k, 10));
  k = key_for(8);
  k.commutative = false;
  CHECK(!w.find(k, 10));
  // The narrowest range wins when ranges of different writers nest.
  wisdom v;
  v.insert(entry_for(4, 1, 1000, "recexch{4}"));
  v.insert(entry_for(4, 2000, 3000, "recexch{-4,4}"));
  CHECK(v.find(key_for(4), 2500)->schedule == "recexch{-4,4}");
}

TEST_CASE("insert replaces overlapping ranges of the same key", "[wisdom][merge]") {
  wisdom w;
  w.insert(entry_for(4, 1, 100, "recexch{4}"));
  w.insert(entry_for(4, 101, 200, "recexch{2,2}"));
  w.insert(entry_for(4, 50, 150, "recexch{-4,4}"));
  REQUIRE(w.entries().size() == 1);
  CHECK(w.find(key_for(4), 100)->schedule == "recexch{-4,4}");
  w.insert(entry_for(4, 50, 150, "recexch{-2,-2,2,2}", "other"));  // another machine: kept apart
  CHECK(w.entries().size() == 2);
}

TEST_CASE("count ranges are power-of-two byte ranges", "[wisdom][range]") {
  std::size_t prev_hi = 0;
  for (std::size_t count = 1; count < 5000; ++count) {
    const auto [lo, hi] = wisdom_count_range(count, 8);
    CHECK(lo <= count);
    CHECK(count <= hi);
    // bytes of the range: [2^k, 2^(k+1))
    CHECK((lo * 8 & (lo * 8 - 1)) == 0);
    CHECK(hi * 8 + 8 > 2 * lo * 8 - 1);
    if (lo > prev_hi)
      prev_hi = hi;
    else
      CHECK(hi == prev_hi);  // one range until it ends
  }
  CHECK(wisdom_count_range(0, 8) == std::pair<std::size_t, std::size_t>{0, 0});
  CHECK(wisdom_count_range(3, 1) == std::pair<std::size_t, std::size_t>{2, 3});
}

TEST_CASE("a truncated file is ignored at every length", "[wisdom][corrupt]") {
  scratch_dir d;
  const std::string text = sample().to_text();
  for (std::size_t n = 0; n < text.size(); n += (n < 400 || n + 400 > text.size()) ? 1 : 37) {
    INFO("truncated to " << n << " of " << text.size() << " bytes");
    write(d / "w", text.substr(0, n));
    std::vector<std::string> warnings;
    wisdom w;
    REQUIRE_NOTHROW(w = wisdom::load(d / "w", "0011223344556677", &warnings));
    CHECK(w.empty());
    CHECK(warnings.size() == 1);
  }
}

TEST_CASE("any flipped byte is detected", "[wisdom][corrupt]") {
  scratch_dir d;
  const std::string text = sample().to_text();
  std::mt19937 gen(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = text;
    const std::size_t at = gen() % bad.size();
    const char old = bad[at];
    do bad[at] = static_cast<char>(gen() % 256);
    while (bad[at] == old);
    INFO("byte " << at << " changed");
    write(d / "w", bad);
    std::vector<std::string> warnings;
    wisdom w;
    REQUIRE_NOTHROW(w = wisdom::load(d / "w", "0011223344556677", &warnings));
    CHECK(w.empty());
    CHECK(warnings.size() == 1);
  }
}

TEST_CASE("every kind of bad file is ignored with a warning", "[wisdom][corrupt]") {
  scratch_dir d;
  const fs::path p = d / "w";
  const std::string good = sample().to_text();
  SECTION("checksum mismatch") {
    std::string bad = good;
    bad.replace(bad.find("recexch{8}"), 10, "recexch{9}");
    write(p, bad);
    ignored(p, "checksum mismatch");
  }
  SECTION("foreign version") {
    std::string v2 = good;
    v2.replace(0, 14, "collc-wisdom 2");
    write(p, resealed(v2));
    ignored(p, "version 2");
  }
  SECTION("foreign machine") {
    write(p, good);
    std::vector<std::string> warnings;
    const wisdom w = wisdom::load(p, "ffffffffffffffff", &warnings);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::Contains("another machine, or for ranks bound otherwise"));
    CHECK(!w.find(key_for(8, "ffffffffffffffff"), 10));
  }
  SECTION("not a wisdom file") {
    write(p, "hello\n");
    ignored(p, "not a collc wisdom file");
    write(p, "");
    ignored(p, "not a collc wisdom file");
  }
  SECTION("no checksum line") {
    std::string bad = good.substr(0, good.rfind("checksum"));
    write(p, bad);
    ignored(p, "truncated");
  }
  SECTION("a directory where the file should be") {
    fs::create_directory(p);
    ignored(p, "not a regular file");
  }
  SECTION("a schedule that does not fit its key, behind a valid checksum") {
    std::string bad = good;
    bad.replace(bad.find("recexch{8}"), 10, "recexch%7B2,2,2%7D");  // product 8 for... 8 ranks is fine
    bad = resealed(bad);
    CHECK(!wisdom::parse(bad).empty());                                           // still valid: {2,2,2} fits 8 ranks
    bad.replace(bad.find("ranks=8 nodes=1 rpn=8"), 21, "ranks=9 nodes=1 rpn=9");  // now it does not
    write(p, resealed(bad));
    ignored(p, "must equal the number of ranks");
  }
  SECTION("a cyclic shift stored for a non-commutative operator") {
    std::string bad = good;
    const auto at = bad.find("schedule=recexch{2,2}+fold");
    REQUIRE(at != std::string::npos);
    bad.replace(at, 26, "schedule=cyclic{2,2,2}");
    write(p, resealed(bad));
    ignored(p, "commutative");
  }
  SECTION("a program for another rank count") {
    std::string bad = good;
    bad.replace(bad.find("\nranks=8\n"), 9, "\nranks=4\n");
    write(p, resealed(bad));
    ignored(p, "wisdom line");
  }
  SECTION("a program length that runs past the file") {
    std::string bad = good;
    const auto at = bad.find("program=8");
    REQUIRE(at != std::string::npos);
    bad.replace(at, 9, "program=9");
    write(p, resealed(bad));
    ignored(p, "runs past");
  }
  SECTION("fields missing, unknown, twice, or malformed") {
    for (const auto& [from, to, why] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {" seconds=", " colour=", "unknown field 'colour'"},
             {" source=tuned", "", "missing field 'source'"},
             {" elem=8", " elem=8 elem=8", "given twice"},
             {" elem=8", " elem=eight", "bad value 'eight'"},
             {" min=1 max=63", " min=63 max=1", "is empty"},
             {" coll=allreduce", " coll=allsum", "bad value 'allsum'"},
             {" commutative=1", " commutative=yes", "bad value 'yes'"},
             {" nodes=1 rpn=8", " nodes=2 rpn=8", "node shape"},
             {" seconds=0.5", " seconds=-1", "bad value '-1'"},
             {" op=my%20op", " op=my%2", "escape"},
             {"entry coll", "entree coll", "expected 'entry'"}}) {
      INFO(from << " -> " << to);
      std::string bad = good;
      const auto at = bad.find(from);
      REQUIRE(at != std::string::npos);
      bad.replace(at, from.size(), to);
      write(p, resealed(bad));
      ignored(p, why);
    }
  }
}

TEST_CASE("update keeps unrelated entries and replaces a corrupt file", "[wisdom][update]") {
  scratch_dir d;
  const fs::path p = d / "w";
  wisdom::update(p, {entry_for(4, 1, 10, "recexch{4}")});
  wisdom::update(p, {entry_for(8, 1, 10, "recexch{8}", "other machine")});
  wisdom::update(p, {entry_for(4, 5, 20, "recexch{-4,4}")});
  auto w = wisdom::load(p);
  CHECK(w.entries().size() == 2);
  CHECK(w.find(key_for(4), 7)->schedule == "recexch{-4,4}");
  CHECK(w.find(key_for(8, "other machine"), 7)->schedule == "recexch{8}");
  // Corrupt, but a wisdom file (its header says so): replaced, with a warning.
  write(p, "collc-wisdom 1\ngarbage\n");
  std::vector<std::string> warnings;
  wisdom::update(p, {entry_for(4, 1, 10, "recexch{4}")}, &warnings);
  REQUIRE(warnings.size() == 2);
  CHECK_THAT(warnings[0], Catch::Contains("truncated"));
  CHECK_THAT(warnings[1], Catch::Contains("is replaced: the content ignored above is lost"));
  CHECK(wisdom::load(p).entries().size() == 1);
  // A bad entry is refused before the file is touched.
  const std::string before = read(p);
  CHECK_THROWS_AS(wisdom::update(p, {entry_for(4, 1, 10, "recexch{8}")}), collc::error);
  CHECK(read(p) == before);
}

TEST_CASE("clear removes entries, then the file", "[wisdom][clear]") {
  scratch_dir d;
  const fs::path p = d / "w";
  wisdom::update(p, sample().entries());
  wisdom::clear(p, nullptr, [](const wisdom_entry& e) { return e.key.ranks == 8; });
  CHECK(wisdom::load(p).entries().size() == 3);
  wisdom::clear(p);
  CHECK(!fs::exists(p));
  CHECK_NOTHROW(wisdom::clear(p));  // nothing there: fine
}

namespace {

/// The names in `dir`, sorted (to see that nothing, no temporary file and no
/// lock, is left behind).
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& f : fs::directory_iterator(dir)) out.push_back(f.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

/// The collc::error of `f` (which must throw one).
template <class F>
collc::error error_of(F&& f) {
  try {
    f();
  } catch (const collc::error& e) {
    return e;
  }
  FAIL("no collc::error thrown");
  return collc::error(errc::invalid_argument, "unreachable");
}

}  // namespace

TEST_CASE("update never replaces a file that is not a wisdom file", "[wisdom][safety]") {
  scratch_dir d;
  const fs::path p = d / "notes.txt";  // COLLC_TUNE=1 COLLC_WISDOM=~/notes.txt
  for (const std::string& notes :
       {std::string("my notes\nline two\n"), std::string("collc-wisdo"), std::string("\0\x01binary", 8),
        std::string(" collc-wisdom 1\n"), std::string("collc-wisdom is a tool I use; my notes:\nline two\n"),
        std::string("collc-wisdom 1")}) {
    INFO("file holds '" << notes << "'");
    write(p, notes);
    std::vector<std::string> warnings;
    const auto e = error_of([&] { wisdom::update(p, {entry_for(4, 1, 10, "recexch{4}")}, &warnings); });
    CHECK(e.code() == errc::io_error);
    CHECK_THAT(e.what(), Catch::Contains(p.string()) && Catch::Contains("not a collc wisdom file") &&
                             Catch::Contains("untouched"));
    CHECK(read(p) == notes);
    CHECK(names_in(d.dir) == std::vector<std::string>{"notes.txt"});  // no temporary file, no lock
  }
  // An empty file holds nothing to lose: it becomes the wisdom file.
  write(p, "");
  wisdom::update(p, {entry_for(4, 1, 10, "recexch{4}")});
  CHECK(wisdom::load(p).entries().size() == 1);
}

TEST_CASE("clear never removes a file that is not a wisdom file, nor a directory", "[wisdom][safety]") {
  scratch_dir d;
  const fs::path p = d / "notes.txt";
  write(p, "my notes\n");
  auto e = error_of([&] { wisdom::clear(p); });
  CHECK(e.code() == errc::io_error);
  CHECK_THAT(e.what(), Catch::Contains(p.string()) && Catch::Contains("not a collc wisdom file"));
  CHECK(read(p) == "my notes\n");
  e = error_of([&] { wisdom::clear(p, nullptr, [](const wisdom_entry&) { return true; }); });
  CHECK(read(p) == "my notes\n");
  write(p, "");  // empty: not a wisdom file either, left alone
  e = error_of([&] { wisdom::clear(p); });
  CHECK_THAT(e.what(), Catch::Contains("empty"));
  CHECK(fs::exists(p));
  // Directories, empty or not, are never removed.
  const fs::path empty = d / "empty", full = d / "full";
  fs::create_directory(empty);
  fs::create_directory(full);
  write(full / "x", "x");
  for (const auto& dir : {empty, full}) {
    e = error_of([&] { wisdom::clear(dir); });
    CHECK(e.code() == errc::io_error);
    CHECK_THAT(e.what(), Catch::Contains(dir.string()) && Catch::Contains("is a directory"));
    CHECK(fs::is_directory(dir));
  }
  CHECK(read(full / "x") == "x");
  CHECK(names_in(d.dir) == std::vector<std::string>{"empty", "full", "notes.txt"});
  // A corrupt wisdom file is still one: clear removes it.
  write(p, "collc-wisdom 1\nentry\n");
  wisdom::clear(p);
  CHECK(!fs::exists(p));
}

TEST_CASE("a symlinked wisdom path is followed: the target updates, the link stays", "[wisdom][safety][symlink]") {
  scratch_dir d;
  fs::create_directory(d / "shared");
  const fs::path target = d / "shared" / "wisdom";
  const fs::path link = d / "w", rel = d / "w-relative", chain = d / "w-chain";
  fs::create_symlink(target, link);          // dangling until the first write
  fs::create_symlink("shared/wisdom", rel);  // relative to the link's directory
  fs::create_symlink("w-relative", chain);   // a link to a link
  wisdom::update(link, {entry_for(4, 1, 10, "recexch{4}")});
  CHECK(fs::is_symlink(link));
  REQUIRE(fs::is_regular_file(target));
  CHECK(wisdom::load(target).entries().size() == 1);
  wisdom::update(rel, {entry_for(8, 1, 10, "recexch{8}")});
  wisdom::update(chain, {entry_for(2, 1, 10, "recexch{2}")});
  CHECK(fs::is_symlink(rel));
  CHECK(fs::is_symlink(chain));
  CHECK(fs::read_symlink(chain) == "w-relative");
  CHECK(wisdom::load(target).entries().size() == 3);
  CHECK(wisdom::load(link).entries().size() == 3);
  // Temporary files and the lock live next to the target and are gone.
  CHECK(names_in(d.dir) == std::vector<std::string>{"shared", "w", "w-chain", "w-relative"});
  CHECK(names_in(d / "shared") == std::vector<std::string>{"wisdom"});
  // clear through a link edits or removes the target, never the link.
  wisdom::clear(link, nullptr, [](const wisdom_entry& e) { return e.key.ranks == 8; });
  CHECK(fs::is_symlink(link));
  CHECK(wisdom::load(target).entries().size() == 2);
  wisdom::clear(chain);
  CHECK(!fs::exists(target));
  CHECK(fs::is_symlink(link));
  CHECK(fs::is_symlink(chain));
  // A link to a user's file protects that file as well.
  write(target, "my notes\n");
  CHECK_THROWS_AS(wisdom::update(link, {entry_for(4, 1, 10, "recexch{4}")}), collc::error);
  CHECK_THROWS_AS(wisdom::clear(link), collc::error);
  CHECK(read(target) == "my notes\n");
  // A loop of links is an error, not a hang.
  fs::create_symlink("loop-b", d / "loop-a");
  fs::create_symlink("loop-a", d / "loop-b");
  const auto e = error_of([&] { wisdom::update(d / "loop-a", {entry_for(4, 1, 10, "recexch{4}")}); });
  CHECK(e.code() == errc::io_error);
  CHECK_THAT(e.what(), Catch::Contains("symbolic links"));
}

TEST_CASE("write errors name the path and the real reason", "[wisdom][safety]") {
  scratch_dir d;
  // A directory where the file should be (COLLC_WISDOM=/tmp).
  fs::create_directory(d / "dir");
  auto e = error_of([&] { wisdom::update(d / "dir", {entry_for(4, 1, 10, "recexch{4}")}); });
  CHECK(e.code() == errc::io_error);
  CHECK_THAT(e.what(), Catch::Contains((d / "dir").string()) && Catch::Contains("is a directory"));
  CHECK_THAT(e.what(), !Catch::Contains("Success"));
  CHECK(fs::is_directory(d / "dir"));
  CHECK(fs::is_empty(d / "dir"));
  e = error_of([&] { sample().write_atomically(d / "dir"); });
  CHECK_THAT(e.what(), Catch::Contains("is a directory") && !Catch::Contains("Success"));
  // A directory that does not exist: the system's reason, not "Success".
  e = error_of([&] { wisdom::update(d / "missing" / "w", {entry_for(4, 1, 10, "recexch{4}")}); });
  CHECK(e.code() == errc::io_error);
  CHECK_THAT(e.what(), Catch::Contains("No such file or directory") && !Catch::Contains("Success"));
  CHECK(names_in(d.dir) == std::vector<std::string>{"dir"});
}

TEST_CASE("a stale lock is taken over", "[wisdom][lock]") {
  scratch_dir d;
  const fs::path p = d / "w";
  fs::create_directory(d / "w.lock");
  fs::last_write_time(d / "w.lock", fs::file_time_type::clock::now() - std::chrono::minutes(5));
  wisdom::update(p, {entry_for(4, 1, 10, "recexch{4}")});
  CHECK(wisdom::load(p).entries().size() == 1);
  CHECK(!fs::exists(d / "w.lock"));
}

TEST_CASE("a wisdom file of a newer format version is never replaced", "[wisdom][safety]") {
  // Its entries are a newer collc's (a file shared by jobs of two
  // versions): this collc cannot read them, and replacing the file lost them.
  scratch_dir d;
  const fs::path p = d / "w";
  const std::string newer = "collc-wisdom 2\nentries this collc cannot read\n";
  write(p, newer);
  const auto e = error_of([&] { wisdom::update(p, {entry_for(4, 1, 10, "recexch{4}")}); });
  CHECK(e.code() == errc::io_error);
  CHECK_THAT(e.what(),
             Catch::Contains("format version 2, newer than this collc's (1)") && Catch::Contains("untouched"));
  CHECK(read(p) == newer);
  CHECK_THROWS_AS(wisdom::clear(p), collc::error);
  CHECK(read(p) == newer);
}

TEST_CASE("a file named like the lock is the user's: left alone, written without the lock", "[wisdom][lock]") {
  // The lock is a directory; an old *file* of that name was removed as a
  // stale lock.
  scratch_dir d;
  const fs::path p = d / "w";
  write(d / "w.lock", "the user's notes\n");
  fs::last_write_time(d / "w.lock", fs::file_time_type::clock::now() - std::chrono::minutes(5));
  std::vector<std::string> warnings;
  wisdom::update(p, {entry_for(4, 1, 10, "recexch{4}")}, &warnings);
  CHECK(wisdom::load(p).entries().size() == 1);
  CHECK(read(d / "w.lock") == "the user's notes\n");
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("is not a directory") && Catch::Contains("writing without the lock"));
}

TEST_CASE("a stale lock that cannot be removed is waited out, not spun on forever", "[wisdom][lock]") {
  // A stale lock directory that is not empty (or not ours to remove): the
  // writer retried its removal at once, forever, and never gave up.
  scratch_dir d;
  const fs::path p = d / "w";
  fs::create_directory(d / "w.lock");
  write(d / "w.lock" / "data.txt", "kept\n");
  fs::last_write_time(d / "w.lock", fs::file_time_type::clock::now() - std::chrono::minutes(5));
  std::vector<std::string> warnings;
  const auto t0 = std::chrono::steady_clock::now();
  wisdom::update(p, {entry_for(4, 1, 10, "recexch{4}")}, &warnings);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(waited < 40);  // the patience is 20 s
  CHECK(wisdom::load(p).entries().size() == 1);
  CHECK(read(d / "w.lock" / "data.txt") == "kept\n");
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("held too long; writing without it"));
}

TEST_CASE("concurrent writers (threads) lose nothing; readers never see a broken file", "[wisdom][concurrency]") {
  scratch_dir d;
  const fs::path p = d / "w";
  constexpr int writers = 6, per_writer = 8;
  std::atomic<bool> done{false};
  std::atomic<int> reader_warnings{0}, reads{0};
  std::thread reader([&] {
    while (!done.load()) {
      std::vector<std::string> warnings;
      (void)wisdom::load(p, {}, &warnings);
      reader_warnings += static_cast<int>(warnings.size());
      ++reads;
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < writers; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < per_writer; ++i)
        wisdom::update(p, {entry_for(2 + t, static_cast<std::size_t>(100 * i + 1),
                                     static_cast<std::size_t>(100 * i + 50), "copyin")});
    });
  for (auto& t : threads) t.join();
  done = true;
  reader.join();
  CHECK(wisdom::load(p).entries().size() == writers * per_writer);
  CHECK(reader_warnings == 0);
  CHECK(reads > 0);
}

TEST_CASE("concurrent writers (processes) lose nothing", "[wisdom][concurrency]") {
  scratch_dir d;
  const fs::path p = d / "w";
  constexpr int procs = 4, per_proc = 10;
  std::vector<pid_t> kids;
  for (int k = 0; k < procs; ++k) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int rc = 0;
      try {
        for (int i = 0; i < per_proc; ++i)
          wisdom::update(p,
                         {entry_for(10 + k, static_cast<std::size_t>(10 * i + 1), static_cast<std::size_t>(10 * i + 5),
                                    "recexch{" + std::to_string(10 + k) + "}")});
      } catch (...) {
        rc = 1;
      }
      _exit(rc);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  std::vector<std::string> warnings;
  const auto w = wisdom::load(p, {}, &warnings);
  CHECK(warnings.empty());
  CHECK(w.entries().size() == procs * per_proc);
  for (int k = 0; k < procs; ++k)
    CHECK(w.find(key_for(10 + k), 33)->schedule == "recexch{" + std::to_string(10 + k) + "}");
}

TEST_CASE("COLLC_WISDOM names the file", "[wisdom][env]") {
  unsetenv("COLLC_WISDOM");
  CHECK(!wisdom_path_from_env());
  setenv("COLLC_WISDOM", "/tmp/some/wisdom", 1);
  CHECK(wisdom_path_from_env() == fs::path("/tmp/some/wisdom"));
  unsetenv("COLLC_WISDOM");
}
