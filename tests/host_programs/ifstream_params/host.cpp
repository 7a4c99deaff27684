// ifstream_params: a C++ host (HandsOnOpenCL's game of life, in its shape) that reads the board
// size and the number of steps from a parameter file with std::ifstream >> and the live cells
// from a data file with while (f >> x >> y >> s); the boards swap after every step.
#define __CL_ENABLE_EXCEPTIONS
#include "cl.hpp"
#include "util.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <vector>

static void fail(const char *why)
{
    std::cerr << why << "\n";
    exit(EXIT_FAILURE);
}

static void read_params(const char *path, unsigned int *nx, unsigned int *ny, unsigned int *steps)
{
    std::ifstream in(path);
    if (!in.is_open()) fail("cannot open the parameter file");
    in >> *nx;
    in >> *ny >> *steps;
    in.close();
}

static void read_board(std::vector<char>& board, const char *path, unsigned int nx,
                       unsigned int ny)
{
    std::ifstream in(path);
    if (!in.is_open()) fail("cannot open the board");
    unsigned int x, y, s;
    while (in >> x >> y >> s) {
        if (x >= nx || y >= ny || s != 1) fail("bad cell");
        board[y * nx + x] = 1;
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) fail("usage: host board.dat board.params");
    unsigned int nx, ny, steps;
    read_params(argv[2], &nx, &ny, &steps);
    cl::Context context(CL_DEVICE_TYPE_DEFAULT);
    cl::CommandQueue queue(context);
    cl::Program program(context, util::loadProgram("step.cl"), true);
    cl::make_kernel<cl::Buffer, cl::Buffer, unsigned int, unsigned int> step(program, "step");

    std::vector<char> board(nx * ny);
    read_board(board, argv[1], nx, ny);
    cl::Buffer tick(context, CL_MEM_READ_WRITE, nx * ny);
    cl::Buffer tock(context, CL_MEM_READ_WRITE, nx * ny);
    cl::copy(queue, board.begin(), board.end(), tick);
    cl::NDRange global(nx, ny);
    for (unsigned int i = 0; i < steps; i++) {
        step(cl::EnqueueArgs(queue, global), tick, tock, nx, ny);
        cl::Buffer tmp = tick;
        tick = tock;
        tock = tmp;
    }
    cl::copy(queue, tick, board.begin(), board.end());
    return 0;
}
