//go:build !microbox_init_image

package nsinit

// image: none in a build without the microbox_init_image tag (image.go).
var image []byte
