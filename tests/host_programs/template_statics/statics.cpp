#include "matrix.h"

template <> MemMgr<float> *Matrix<float>::mgr = 0;
template <> MemMgr<double> *Matrix<double>::mgr = 0;
template <class T>
int Matrix<T>::made = 0;
template class Matrix<float>;
template class Matrix<double>;
int Config::scale = 1;
