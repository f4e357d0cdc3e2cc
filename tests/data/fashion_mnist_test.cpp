// Fashion-MNIST: the Debian package's files load with the expected shapes; bad files are rejected.
#include "engine/data/fashion_mnist.h"

#include <zlib.h>

#include "engine/core/error.h"
#include "tests/data/data_test_util.h"

using namespace tessera;
using tessera::test::TempDir;

namespace {

void gz_write(const std::string& path, const std::vector<uint8_t>& bytes) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    gzwrite(f, bytes.data(), (unsigned)bytes.size());
    gzclose(f);
}

std::vector<uint8_t> be32s(std::initializer_list<uint32_t> v) {
    std::vector<uint8_t> b;
    for (uint32_t x : v)
        for (int s = 24; s >= 0; s -= 8) b.push_back((uint8_t)(x >> s));
    return b;
}

std::string load_error(const std::string& dir) {
    try {
        fashion_mnist_load("test", dir);
    } catch (const InputError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST(FashionMnist, LoadsTrainAndTest) {
    TS_REQUIRE_DATA(std::string(kFashionMnistDefaultDir) + "/train-images-idx3-ubyte.gz");
    ImageSet train = fashion_mnist_load("train");
    ImageSet test = fashion_mnist_load("test");
    EXPECT_EQ(train.count, 60000);
    EXPECT_EQ(test.count, 10000);
    for (const ImageSet* s : {&train, &test}) {
        EXPECT_EQ(s->rows, 28);
        EXPECT_EQ(s->cols, 28);
        EXPECT_EQ(s->pixels.size(), (size_t)s->count * 28 * 28);
        ASSERT_EQ(s->labels.size(), (size_t)s->count);
        std::vector<int> per_class(10, 0);
        for (uint8_t l : s->labels) {
            ASSERT_LE(l, 9);
            per_class[l]++;
        }
        for (int c = 0; c < 10; c++) EXPECT_EQ(per_class[c], s->count / 10);  // balanced classes
    }
    EXPECT_THROW(fashion_mnist_load("validation"), InputError);
}

TEST(FashionMnist, RejectsBadFiles) {
    TempDir tmp;
    std::string dir = tmp.path().string();
    EXPECT_NE(load_error(dir).find("not found"), std::string::npos);

    std::vector<uint8_t> images = be32s({2051, 2, 2, 2});
    images.insert(images.end(), 8, 7);
    std::vector<uint8_t> labels = be32s({2049, 2});
    labels.insert(labels.end(), {1, 9});
    gz_write(tmp.file("t10k-images-idx3-ubyte.gz"), images);
    gz_write(tmp.file("t10k-labels-idx1-ubyte.gz"), labels);
    ImageSet ok = fashion_mnist_load("test", dir);
    EXPECT_EQ(ok.count, 2);
    EXPECT_EQ(ok.labels, (std::vector<uint8_t>{1, 9}));

    std::vector<uint8_t> bad_magic = labels;
    bad_magic[3] = 0x02;  // 2050
    gz_write(tmp.file("t10k-labels-idx1-ubyte.gz"), bad_magic);
    std::string e = load_error(dir);
    EXPECT_NE(e.find("magic"), std::string::npos) << e;
    EXPECT_NE(e.find("2049"), std::string::npos) << e;
    EXPECT_NE(e.find("2050"), std::string::npos) << e;

    std::vector<uint8_t> three = be32s({2049, 3});
    three.insert(three.end(), {1, 2, 3});
    gz_write(tmp.file("t10k-labels-idx1-ubyte.gz"), three);
    e = load_error(dir);
    EXPECT_NE(e.find("expected 2 labels, found 3"), std::string::npos) << e;

    std::vector<uint8_t> short_images(images.begin(), images.end() - 1);
    gz_write(tmp.file("t10k-images-idx3-ubyte.gz"), short_images);
    e = load_error(dir);
    EXPECT_NE(e.find("t10k-images-idx3-ubyte.gz"), std::string::npos) << e;
    EXPECT_NE(e.find("size mismatch"), std::string::npos) << e;
}
