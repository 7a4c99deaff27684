// SHOC Matrix2D-style: a class template allocates through a static pointer to an allocator
// object, made on first use (`if (mgr == NULL) mgr = new DefaultMemMgr<T>;`) and defined per
// specialization in another file; a static counter of the template (one per element type)
// and a plain class's static member size the launches.
#ifndef MATRIX_H
#define MATRIX_H
#include <cstddef>

template <class T>
class MemMgr {
  public:
    virtual ~MemMgr() {}
    virtual T *Alloc(size_t n) = 0;
};

template <class T>
class DefaultMemMgr : public MemMgr<T> {
  public:
    virtual T *Alloc(size_t n) { return new T[n]; }
};

template <class T>
class Matrix {
    static MemMgr<T> *mgr;
    static int made;
    size_t n;
    T *data;

  public:
    Matrix(size_t _n) : n(_n) {
        if (mgr == NULL) {
            mgr = new DefaultMemMgr<T>;
        }
        data = mgr->Alloc(n);
        made++;
    }
    size_t Bytes() const { return n * sizeof(T); }
    T *Data() { return data; }
    int Count() const { return made; }
};

class Config {
  public:
    static int scale;
};
#endif
