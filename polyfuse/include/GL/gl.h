/* polyfuse: the OpenGL types the OpenCL C++ wrapper (cl.hpp 1.2) declares interop calls with,
 * used only when no OpenGL headers are installed; polyfuse models no OpenGL call. */
#ifndef POLYFUSE_GL_H
#define POLYFUSE_GL_H
typedef unsigned int GLenum;
typedef unsigned char GLboolean;
typedef unsigned int GLbitfield;
typedef void GLvoid;
typedef signed char GLbyte;
typedef short GLshort;
typedef int GLint;
typedef int GLsizei;
typedef unsigned char GLubyte;
typedef unsigned short GLushort;
typedef unsigned int GLuint;
typedef float GLfloat;
typedef float GLclampf;
typedef double GLdouble;
typedef double GLclampd;
#endif
