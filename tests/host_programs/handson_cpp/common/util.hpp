// HandsOnOpenCL-style helpers (Cpp_common/util.hpp): read a kernel file into a string, time.
#ifndef UTIL_HPP
#define UTIL_HPP
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

namespace util {

class Timer {
public:
    Timer() : start(std::chrono::steady_clock::now()) {}
    void reset() { start = std::chrono::steady_clock::now(); }
    unsigned long getTimeMilliseconds() {
        auto d = std::chrono::steady_clock::now() - start;
        return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
    }

private:
    std::chrono::steady_clock::time_point start;
};

inline std::string loadProgram(std::string input) {
    std::ifstream stream(input.c_str());
    if (!stream.is_open()) {
        std::cout << "Cannot open file: " << input << std::endl;
        exit(1);
    }
    return std::string(std::istreambuf_iterator<char>(stream),
                       (std::istreambuf_iterator<char>()));
}

}  // namespace util
#endif
